//! The UI's state. Key presses and query answers change it; `draw` renders
//! it. Nothing here touches a terminal, so every behaviour is testable.

use std::collections::{HashMap, VecDeque};

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseEvent, MouseEventKind};
use weft_query::{Answer, Cell, feed::Feed, health::Health};

use crate::{
    input::{Input, InputKind},
    timeline::{self, Timeline},
};

/// The views, in the order of their number keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    Overview,
    Latency,
    Query,
    Timeline,
}

impl View {
    pub const ALL: [View; 4] = [View::Overview, View::Latency, View::Query, View::Timeline];

    pub fn name(self) -> &'static str {
        match self {
            View::Overview => "Overview",
            View::Latency => "Latency",
            View::Query => "Query",
            View::Timeline => "Timeline",
        }
    }
}

/// The sliding windows the latency view offers, as written in queries.
pub const WINDOWS: [(&str, u64); 4] = [
    ("10s", 10_000_000_000),
    ("1m", 60_000_000_000),
    ("5m", 300_000_000_000),
    ("1h", 3_600_000_000_000),
];

/// A latency breakdown: a source, the field it groups by, its latency field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Breakdown {
    pub source: &'static str,
    pub key: &'static str,
    pub field: &'static str,
}

/// What the latency view can break down, in the order `o` cycles.
pub const BREAKDOWNS: [Breakdown; 3] = [
    Breakdown {
        source: "syscalls",
        key: "name",
        field: "dur",
    },
    Breakdown {
        source: "block",
        key: "op",
        field: "latency",
    },
    Breakdown {
        source: "sched",
        key: "state",
        field: "off_cpu",
    },
];

/// How many rate samples an overview row keeps (one a refresh).
pub const TREND: usize = 60;

/// A question for the feed, and what its answer is for.
#[derive(Clone, Debug, PartialEq)]
pub enum Job {
    /// The latency table.
    Latency(String),
    /// The histogram of the selected latency row.
    Hist(String),
    /// The overview's heatmap of the selected source.
    Heatmap(String),
    /// A source's headline metric.
    Headline(String, String),
    /// A query the user typed or drilled into.
    User(String),
    /// The slowest syscall of the window, to centre the timeline on.
    Anchor(String),
    /// A source's counts on the timeline's axis.
    Timeline(String, String),
}

impl Job {
    pub fn query(&self) -> &str {
        match self {
            Job::Latency(q)
            | Job::Hist(q)
            | Job::Heatmap(q)
            | Job::Headline(_, q)
            | Job::User(q)
            | Job::Anchor(q)
            | Job::Timeline(_, q) => q,
        }
    }
}

/// What the event loop should do after a key press.
#[derive(Debug, PartialEq)]
pub enum Effect {
    None,
    /// Ask the refresh queries again now (the window, filter, cursor or
    /// selection changed).
    Refresh,
    /// Run this query now (the user's, or one an answer calls for).
    Run(Job),
    /// Capture Intel PT of this process.
    CapturePt(u32),
}

/// One row of the overview.
#[derive(Clone, Debug, Default)]
pub struct SourceRow {
    pub name: String,
    pub received: u64,
    pub lost: u64,
    /// Records a second over the last refreshes, oldest first.
    pub rates: VecDeque<f64>,
    /// The headline metric, as text.
    pub headline: String,
    /// The headline's p99 latency (ns) over the last refreshes, oldest
    /// first, for the sources that have one.
    pub p99s: VecDeque<f64>,
}

/// A column of the latency table to sort by, and the direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sort {
    pub column: usize,
    pub descending: bool,
}

/// The whole UI state.
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent states of the UI (frozen, help, quit) and a setting"
)]
pub struct State {
    pub view: View,
    pub title: String,
    /// A recording's first and last arrival; `None` when live.
    pub range: Option<(u64, u64)>,
    /// A recording's present: the end of every window.
    pub cursor: u64,
    /// Index into [`WINDOWS`].
    pub window: usize,
    /// Index into [`BREAKDOWNS`].
    pub breakdown: usize,
    /// Only this process name (`comm`), when set.
    pub filter: Option<String>,
    /// The display stops changing; the capture goes on.
    pub frozen: bool,
    pub help: bool,
    /// The query bar or the filter bar, while open.
    pub input: Option<Input>,
    pub history: Vec<String>,
    pub schema: Vec<(String, Vec<String>)>,
    pub wall_offset: Option<i64>,
    pub sources: Vec<SourceRow>,
    pub health: Health,
    /// When the last health sample was taken (seconds since start).
    health_at: Option<f64>,
    pub latency: Option<Result<Answer, String>>,
    pub sort: Sort,
    /// Selected row of the latency table (in sorted order) or of the
    /// query result.
    pub selected: usize,
    pub hist: Option<Answer>,
    /// The overview's latency heatmap of the selected source, and the
    /// query that gave it.
    pub heatmap: Option<(String, Answer)>,
    /// The last query the user ran, and its answer.
    pub result: Option<(String, Result<Answer, String>)>,
    pub timeline: Timeline,
    /// A note for the status line (completions, what a key did).
    pub message: String,
    pub quit: bool,
    /// Draw without colours (`NO_COLOR`, no-color.org): what colours
    /// marked shows in reverse video instead.
    pub no_color: bool,
}

impl State {
    pub fn new(feed: &dyn Feed) -> Self {
        let range = feed.range();
        Self {
            view: View::Overview,
            title: feed.title(),
            range,
            cursor: range.map_or(0, |(_, last)| last),
            window: 0,
            breakdown: 0,
            filter: None,
            frozen: false,
            help: false,
            input: None,
            history: Vec::new(),
            schema: feed.schema(),
            wall_offset: feed.wall_offset(),
            sources: Vec::new(),
            health: Health::default(),
            health_at: None,
            latency: None,
            sort: Sort {
                column: 1,
                descending: true,
            },
            selected: 0,
            hist: None,
            heatmap: None,
            result: None,
            timeline: Timeline::default(),
            message: String::new(),
            quit: false,
            no_color: std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()),
        }
    }

    pub fn live(&self) -> bool {
        self.range.is_none()
    }

    /// The window clause every refresh query ends with: `last 10s` live,
    /// the range ending at the cursor in a recording.
    pub fn window_clause(&self) -> String {
        let (name, ns) = WINDOWS[self.window];
        if self.live() {
            format!("last {name}")
        } else {
            format!("[{}, {}]", self.cursor.saturating_sub(ns), self.cursor)
        }
    }

    fn window_secs(&self) -> f64 {
        WINDOWS[self.window].1 as f64 / 1e9
    }

    /// The process filter as a condition, e.g. `comm = "redis-server"`.
    fn filter_condition(&self) -> Option<String> {
        self.filter.as_ref().map(|comm| {
            let op = if comm.contains(['*', '?']) { "~" } else { "=" };
            format!("comm {op} {}", quote(comm))
        })
    }

    /// `syscalls`, with the process filter's `where` when set.
    fn syscalls_where(&self, more: Option<String>) -> String {
        self.source_where("syscalls", more)
    }

    /// `source`, with `more` and the process filter as its `where`.
    fn source_where(&self, source: &str, more: Option<String>) -> String {
        let conditions: Vec<String> = more.into_iter().chain(self.filter_condition()).collect();
        if conditions.is_empty() {
            source.into()
        } else {
            format!("{source} where {}", conditions.join(" and "))
        }
    }

    /// What the latency view breaks down now.
    pub fn breakdown(&self) -> Breakdown {
        BREAKDOWNS[self.breakdown]
    }

    pub fn latency_query(&self) -> String {
        let Breakdown { source, key, field } = self.breakdown();
        format!(
            "{} | count, p50({field}), p90({field}), p99({field}), p99.9({field}), max({field}) by {key} {}",
            self.source_where(source, None),
            self.window_clause()
        )
    }

    /// `source` where the breakdown's key is `value`.
    fn one_key(&self, value: &str) -> String {
        let Breakdown { source, key, .. } = self.breakdown();
        self.source_where(source, Some(format!("{key} = {}", quote(value))))
    }

    pub(crate) fn hist_query(&self, value: &str) -> String {
        format!(
            "{} | hist({}) {}",
            self.one_key(value),
            self.breakdown().field,
            self.window_clause()
        )
    }

    /// The query behind a source's headline metric, if it has one.
    fn headline_query(&self, source: &str) -> Option<String> {
        let window = self.window_clause();
        Some(match source {
            "syscalls" => format!("{} | count, p99(dur) {window}", self.syscalls_where(None)),
            "sched" => format!("sched | p99(runq) {window}"),
            "block" => format!("block | p99(latency) {window}"),
            "net" => format!("net | count, sum(len) {window}"),
            "pagecache" => format!("pagecache | sum(pages) by kind {window}"),
            _ => return None,
        })
    }

    /// The overview's heatmap of the selected source's latency: its
    /// log2 histogram per time step over the window (from the chunk
    /// summaries, one step at a time). `None` for a source without one.
    pub fn heatmap_query(&self) -> Option<String> {
        let row = self.sources.get(self.selected)?;
        let (from, field) = match row.name.as_str() {
            "syscalls" => (self.syscalls_where(None), "dur"),
            "sched" => ("sched".to_owned(), "runq"),
            "block" => ("block".to_owned(), "latency"),
            _ => return None,
        };
        // About 40 to 60 columns over each window.
        let step = match WINDOWS[self.window].0 {
            "10s" => "250ms",
            "1m" => "1s",
            "5m" => "5s",
            _ => "1m",
        };
        Some(format!(
            "{from} | hist({field}) every {step} {}",
            self.window_clause()
        ))
    }

    /// The queries that keep the views current: the headlines always (the
    /// overview shows them), its heatmap while it is shown, the latency
    /// table and histogram only while they are shown (a grouped
    /// percentile is the costliest question the UI asks; switching views
    /// refreshes at once).
    pub fn refresh_jobs(&self) -> Vec<Job> {
        let mut jobs = Vec::new();
        if self.view == View::Overview
            && let Some(query) = self.heatmap_query()
        {
            jobs.push(Job::Heatmap(query));
        }
        if self.view == View::Latency {
            jobs.push(Job::Latency(self.latency_query()));
            if let Some(name) = self.selected_key() {
                jobs.push(Job::Hist(self.hist_query(&name)));
            }
        }
        for row in &self.sources {
            if let Some(query) = self.headline_query(&row.name) {
                jobs.push(Job::Headline(row.name.clone(), query));
            }
        }
        if self.view == View::Timeline {
            jobs.extend(self.timeline_jobs());
        }
        jobs
    }

    /// The timeline's anchor, or once it has one, each source's counts.
    fn timeline_jobs(&self) -> Vec<Job> {
        if self.timeline.anchor.is_none() {
            return vec![Job::Anchor(self.anchor_query())];
        }
        self.sources
            .iter()
            .filter(|row| !["tasks", "symbols"].contains(&row.name.as_str()))
            .filter_map(|row| {
                let query = self.timeline.query(&row.name)?;
                Some(Job::Timeline(row.name.clone(), query))
            })
            .collect()
    }

    fn anchor_query(&self) -> String {
        format!(
            "{} | sort dur desc | limit 1 {}",
            self.syscalls_where(None),
            self.window_clause()
        )
    }

    /// Takes a sample of the capture's counters, `at` seconds since start.
    pub fn apply_health(&mut self, health: Health, at: f64) {
        if self.frozen {
            return;
        }
        let elapsed = self.health_at.map(|last| at - last);
        for source in &health.sources {
            if !self.sources.iter().any(|r| r.name == source.name) {
                self.sources.push(SourceRow {
                    name: source.name.clone(),
                    ..SourceRow::default()
                });
            }
            let row = self
                .sources
                .iter_mut()
                .find(|r| r.name == source.name)
                .expect("added above");
            if let Some(elapsed) = elapsed.filter(|e| *e > 0.0) {
                let rate = source.received.saturating_sub(row.received) as f64 / elapsed;
                if row.rates.len() == TREND {
                    row.rates.pop_front();
                }
                row.rates.push_back(rate);
            }
            row.received = source.received;
            row.lost = source.lost;
        }
        self.health = health;
        self.health_at = Some(at);
    }

    /// Takes an answer the feed gave for `job`. Answers to refresh
    /// queries that no longer match the state (the window or filter
    /// changed meanwhile) are dropped, as are all but the user's while
    /// frozen. Returns what to ask next: the refresh queries again when
    /// the answer changed them (the timeline found its anchor), the
    /// selected row's histogram when the latency table first has rows (a
    /// recording asks nothing again until the user moves).
    pub fn apply(&mut self, job: Job, answer: Result<Answer, String>) -> Effect {
        if self.frozen && !matches!(job, Job::User(_)) {
            return Effect::None;
        }
        match job {
            Job::Latency(query) if query == self.latency_query() => {
                self.latency = Some(answer);
                let rows = self.latency_rows().len();
                if self.view == View::Latency {
                    self.selected = self.selected.min(rows.saturating_sub(1));
                    if let (None, Some(key)) = (&self.hist, self.selected_key()) {
                        return Effect::Run(Job::Hist(self.hist_query(&key)));
                    }
                }
            }
            Job::Heatmap(query) if self.heatmap_query().as_ref() == Some(&query) => {
                self.heatmap = answer.ok().map(|answer| (query, answer));
            }
            Job::Hist(query) => {
                let current = self.selected_key().map(|name| self.hist_query(&name));
                if current.as_deref() == Some(query.as_str()) {
                    self.hist = answer.ok();
                }
            }
            Job::Headline(source, query)
                if self.headline_query(&source).as_ref() == Some(&query) =>
            {
                let text = answer
                    .as_ref()
                    .map_or_else(|e| first_line(e), |a| self.headline(&source, a));
                let p99 = answer.ok().and_then(|a| headline_p99(&source, &a));
                if let Some(row) = self.sources.iter_mut().find(|r| r.name == source) {
                    row.headline = text;
                    if let Some(p99) = p99 {
                        if row.p99s.len() == TREND {
                            row.p99s.pop_front();
                        }
                        row.p99s.push_back(p99);
                    }
                }
            }
            Job::Anchor(query) if query == self.anchor_query() => {
                let anchor = answer.ok().and_then(|a| timeline::anchor_of(&a, 0));
                if let (None, Some(anchor)) = (&self.timeline.anchor, anchor) {
                    self.timeline.center(anchor);
                    return Effect::Refresh;
                }
            }
            Job::Timeline(source, query)
                if self.timeline.query(&source).as_ref() == Some(&query) =>
            {
                if let Ok(answer) = answer {
                    self.timeline.apply(&source, &answer);
                }
            }
            Job::User(query) => {
                // A broken query comes back to the bar, its error above it.
                if answer.is_err() && self.input.is_none() {
                    self.input = Some(Input::new(InputKind::Query, &query));
                }
                // An answer over a window that lost records says so.
                self.message = match &answer {
                    Ok(a) if a.lost > 0 => format!(
                        "{} records of this source were lost in this window: the answer lacks them",
                        a.lost
                    ),
                    Ok(Answer {
                        approximate: Some(note),
                        ..
                    }) => format!("approximate: {note}"),
                    _ => String::new(),
                };
                self.result = Some((query, answer));
                if self.view == View::Query {
                    self.selected = 0;
                }
            }
            _ => {}
        }
        Effect::None
    }

    /// A source's headline from the answer to its query.
    fn headline(&self, source: &str, answer: &Answer) -> String {
        let Some(row) = answer.rows.first() else {
            return String::new();
        };
        let int = |i: usize| match row.get(i) {
            Some(Cell::Int(n)) => Some(*n),
            _ => None,
        };
        let text = |i: usize| answer.text(0, i, self.wall_offset);
        match source {
            "syscalls" if int(0).unwrap_or(0) > 0 => format!("p99 {}", text(1)),
            "sched" if int(0).is_some() => format!("run-queue p99 {}", text(0)),
            "block" if int(0).is_some() => format!("I/O p99 {}", text(0)),
            "net" => {
                let secs = self.window_secs();
                format!(
                    "{:.0} packets/s, {}/s",
                    int(0).unwrap_or(0) as f64 / secs,
                    bytes(int(1).unwrap_or(0) as f64 / secs)
                )
            }
            "pagecache" => hit_ratio(answer).map_or_else(
                || "no lookups (hit ratio needs Linux 6.10)".into(),
                |ratio| format!("hit ratio {:.1}%", ratio * 100.0),
            ),
            _ => String::new(),
        }
    }

    /// Latency rows in display order: indexes into the answer's rows.
    pub fn latency_rows(&self) -> Vec<usize> {
        let Some(Ok(answer)) = &self.latency else {
            return Vec::new();
        };
        let mut order: Vec<usize> = (0..answer.rows.len()).collect();
        let column = self.sort.column.min(answer.columns.len().saturating_sub(1));
        order.sort_by(|&a, &b| {
            let ordering = compare(&answer.rows[a][column], &answer.rows[b][column]);
            if self.sort.descending {
                ordering.reverse()
            } else {
                ordering
            }
        });
        order
    }

    /// The key (syscall name, block op) of the selected latency row.
    pub fn selected_key(&self) -> Option<String> {
        let Some(Ok(answer)) = &self.latency else {
            return None;
        };
        let row = *self.latency_rows().get(self.selected)?;
        match &answer.rows[row][0] {
            Cell::Text(name) => Some(name.clone()),
            _ => Some(answer.text(row, 0, None)),
        }
    }

    /// Handles a key press.
    pub fn key(&mut self, key: KeyEvent) -> Effect {
        if key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL) {
            self.quit = true;
            return Effect::None;
        }
        if self.input.is_some() {
            return self.input_key(key);
        }
        if self.help {
            // Any key closes the help; `q` still quits.
            self.help = false;
            if key.code != KeyCode::Char('q') {
                return Effect::None;
            }
        }
        self.message.clear();
        match key.code {
            KeyCode::Char('q') => self.quit = true,
            KeyCode::Char('?') => self.help = true,
            KeyCode::Char('f') => {
                self.frozen = !self.frozen;
                return if self.frozen {
                    Effect::None
                } else {
                    Effect::Refresh
                };
            }
            KeyCode::Char(':') => self.input = Some(Input::new(InputKind::Query, "")),
            KeyCode::Char('/') => {
                let current = self.filter.clone().unwrap_or_default();
                self.input = Some(Input::new(InputKind::Filter, &current));
            }
            KeyCode::Char(c @ '1'..='4') => {
                self.show(View::ALL[c as usize - '1' as usize]);
                return Effect::Refresh;
            }
            KeyCode::Tab => {
                let next = View::ALL.iter().position(|v| *v == self.view).unwrap_or(0) + 1;
                self.show(View::ALL[next % View::ALL.len()]);
                return Effect::Refresh;
            }
            KeyCode::Char('t') if self.view == View::Query => return self.anchor_selected(),
            KeyCode::Char('p') if self.view == View::Query => return self.pt_of_selected(),
            KeyCode::Char('e') => return self.explain_selected(),
            KeyCode::Char(c @ ('+' | '=' | '-')) if self.view == View::Timeline => {
                self.timeline.zoom(c != '-');
                return Effect::Refresh;
            }
            KeyCode::Char('a') if self.view == View::Timeline => {
                self.timeline.anchor = None;
                self.timeline.series.clear();
                return Effect::Refresh;
            }
            KeyCode::Char('w') => {
                self.window = (self.window + 1) % WINDOWS.len();
                return Effect::Refresh;
            }
            KeyCode::Char('[') if !self.live() => return self.move_cursor(false),
            KeyCode::Char(']') if !self.live() => return self.move_cursor(true),
            KeyCode::Char('s') if self.view == View::Latency => {
                self.sort.column = (self.sort.column + 1) % 7;
                self.sort.descending = self.sort.column != 0;
            }
            KeyCode::Char('o') if self.view == View::Latency => return self.next_breakdown(),
            KeyCode::Char('r') if self.view == View::Latency => {
                self.sort.descending = !self.sort.descending;
            }
            KeyCode::Up => return self.select(-1),
            KeyCode::Down => return self.select(1),
            KeyCode::PageUp => return self.select(-10),
            KeyCode::PageDown => return self.select(10),
            KeyCode::Home => return self.select(i64::MIN / 2),
            KeyCode::End => return self.select(i64::MAX / 2),
            KeyCode::Enter => return self.drill(),
            _ => {}
        }
        Effect::None
    }

    /// Mouse wheel scrolls the selection.
    pub fn mouse(&mut self, event: MouseEvent) -> Effect {
        match event.kind {
            MouseEventKind::ScrollUp => self.select(-3),
            MouseEventKind::ScrollDown => self.select(3),
            _ => Effect::None,
        }
    }

    fn show(&mut self, view: View) {
        if self.view != view {
            self.view = view;
            self.selected = 0;
        }
    }

    /// The next breakdown whose source the capture has.
    fn next_breakdown(&mut self) -> Effect {
        let present = |b: &Breakdown| self.sources.iter().any(|r| r.name == b.source);
        let next = (1..=BREAKDOWNS.len())
            .map(|step| (self.breakdown + step) % BREAKDOWNS.len())
            .find(|&i| present(&BREAKDOWNS[i]));
        match next {
            Some(i) if i != self.breakdown => {
                self.breakdown = i;
                self.latency = None;
                self.hist = None;
                self.selected = 0;
                Effect::Refresh
            }
            _ => {
                self.message = "no other latency in this capture".into();
                Effect::None
            }
        }
    }

    /// Moves the recording's cursor by one window, within the recording.
    fn move_cursor(&mut self, forward: bool) -> Effect {
        let Some((first, last)) = self.range else {
            return Effect::None;
        };
        let step = WINDOWS[self.window].1;
        self.cursor = if forward {
            self.cursor.saturating_add(step).min(last)
        } else {
            self.cursor.saturating_sub(step).max(first)
        };
        Effect::Refresh
    }

    /// Moves the selection by `delta` rows in the current view.
    fn select(&mut self, delta: i64) -> Effect {
        let rows = match self.view {
            View::Overview => self.sources.len(),
            View::Latency => self.latency_rows().len(),
            View::Query => match &self.result {
                Some((_, Ok(answer))) => answer.rows.len(),
                _ => 0,
            },
            View::Timeline => self.timeline.series.len(),
        };
        let before = self.selected;
        self.selected = self
            .selected
            .saturating_add_signed(delta as isize)
            .min(rows.saturating_sub(1));
        if self.selected == before {
            return Effect::None;
        }
        match self.view {
            View::Latency => self.hist = None,
            View::Overview => self.heatmap = None,
            _ => return Effect::None,
        }
        Effect::Refresh
    }

    /// Enter: from a syscall to its slowest calls; from a listed record
    /// to everything its thread did around it.
    fn drill(&mut self) -> Effect {
        let query = match self.view {
            View::Overview => {
                let Some(row) = self.sources.get(self.selected) else {
                    return Effect::None;
                };
                format!(
                    "{} | sort time desc | limit 100 {}",
                    row.name,
                    self.window_clause()
                )
            }
            View::Latency => {
                let Some(value) = self.selected_key() else {
                    return Effect::None;
                };
                format!(
                    "{} | sort {} desc | limit 100 {}",
                    self.one_key(&value),
                    self.breakdown().field,
                    self.window_clause()
                )
            }
            View::Query => match self.around_selected() {
                Some(query) => query,
                None => return Effect::None,
            },
            View::Timeline => {
                let series = self.timeline.series.get(self.selected);
                // Another host's source in a fleet (`HOST:source`): the
                // anchor's thread is this host's, so all its records list.
                let threaded = |source: &str| {
                    !source.contains(':')
                        && self.schema.iter().any(|(name, fields)| {
                            name == source && fields.iter().any(|f| f == "tid")
                        })
                };
                let query = series
                    .and_then(|s| self.timeline.records_query(&s.source, threaded(&s.source)));
                match query {
                    Some(query) => query,
                    None => return Effect::None,
                }
            }
        };
        self.run_query(query)
    }

    /// `e`: where the time went (`| explain`, docs/query.md): of the
    /// selected syscall's slowest 1 % in the window (Latency view), or of
    /// a listed call and its thread's calls of that name at least as slow,
    /// against all of them in the minute around it (Query view).
    fn explain_selected(&mut self) -> Effect {
        let query = match self.view {
            View::Latency if self.breakdown().source == "syscalls" => {
                self.selected_key().map(|value| {
                    format!(
                        "{} and dur > p99 {} | explain",
                        self.one_key(&value),
                        self.window_clause()
                    )
                })
            }
            View::Query => self.explain_listed(),
            _ => None,
        };
        if let Some(query) = query {
            return self.run_query(query);
        }
        self.message = "e explains a syscall (2: Latency) or a listed syscall (3: Query)".into();
        Effect::None
    }

    /// The selected row's cell of column `name` in the Query view's answer.
    fn selected_cell(&self, name: &str) -> Option<&Cell> {
        let Some((_, Ok(answer))) = &self.result else {
            return None;
        };
        let column = answer.columns.iter().position(|h| h.name == name)?;
        answer.rows.get(self.selected)?.get(column)
    }

    /// `| explain` of the listed syscall selected in the Query view.
    fn explain_listed(&self) -> Option<String> {
        let Some((query, Ok(_))) = &self.result else {
            return None;
        };
        if query.split_whitespace().next() != Some("syscalls") {
            return None;
        }
        let int = |name: &str| match self.selected_cell(name)? {
            Cell::Int(n) => Some(*n),
            _ => None,
        };
        let (time, tid, dur) = (int("time")?, int("tid")?, int("dur")?);
        let Some(Cell::Text(name)) = self.selected_cell("name") else {
            return None;
        };
        let minute = 60_000_000_000;
        Some(format!(
            "syscalls where tid = {tid} and name = {} and dur >= {dur} [{}, {}] | explain",
            quote(name),
            time.saturating_sub(minute).max(0),
            time + minute
        ))
    }

    /// `t` on a listed record: the timeline around it.
    fn anchor_selected(&mut self) -> Effect {
        let Some((_, Ok(answer))) = &self.result else {
            return Effect::None;
        };
        let Some(anchor) = timeline::anchor_of(answer, self.selected) else {
            self.message = "this row has no time to centre the timeline on".into();
            return Effect::None;
        };
        self.timeline.center(anchor);
        self.show(View::Timeline);
        Effect::Refresh
    }

    /// `p` on a listed record: Intel PT of its process.
    fn pt_of_selected(&mut self) -> Effect {
        let pid = match self.selected_cell("pid") {
            Some(Cell::Int(pid)) => u32::try_from(*pid).ok().filter(|p| *p > 0),
            _ => None,
        };
        if let Some(pid) = pid {
            return Effect::CapturePt(pid);
        }
        self.message = "this row names no process to capture".into();
        Effect::None
    }

    /// For a selected record with a `time` and a `tid`: the syscalls of
    /// that thread in the second around it.
    fn around_selected(&self) -> Option<String> {
        let int = |name: &str| match self.selected_cell(name)? {
            Cell::Int(n) => Some(*n),
            _ => None,
        };
        let (time, tid) = (int("time")?, int("tid")?);
        let second = 1_000_000_000;
        Some(format!(
            "syscalls where tid = {tid} [{}, {}]",
            time.saturating_sub(second).max(0),
            time + second
        ))
    }

    fn run_query(&mut self, query: String) -> Effect {
        if self.history.last() != Some(&query) {
            self.history.push(query.clone());
        }
        self.show(View::Query);
        self.message = "running…".into();
        Effect::Run(Job::User(query))
    }

    fn input_key(&mut self, key: KeyEvent) -> Effect {
        let input = self.input.as_mut().expect("checked by the caller");
        match key.code {
            KeyCode::Esc => self.input = None,
            KeyCode::Enter => {
                let input = self.input.take().expect("checked above");
                let text = input.text.trim().to_owned();
                return match input.kind {
                    InputKind::Query if text.is_empty() => Effect::None,
                    InputKind::Query => self.run_query(text),
                    InputKind::Filter => {
                        self.filter = (!text.is_empty()).then_some(text);
                        self.selected = 0;
                        Effect::Refresh
                    }
                };
            }
            KeyCode::Tab if input.kind == InputKind::Query => {
                self.message = input.complete(&self.schema);
            }
            KeyCode::Up if input.kind == InputKind::Query => input.history(&self.history, -1),
            KeyCode::Down if input.kind == InputKind::Query => input.history(&self.history, 1),
            _ => input.edit(key),
        }
        Effect::None
    }
}

/// A string literal of the query language.
/// The p99 latency a source's headline answer holds, where it has one.
fn headline_p99(source: &str, answer: &Answer) -> Option<f64> {
    let column = match source {
        "syscalls" => 1,
        "sched" | "block" => 0,
        _ => return None,
    };
    match answer.rows.first()?.get(column)? {
        Cell::Int(ns) => Some(*ns as f64),
        _ => None,
    }
}

fn quote(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().to_owned()
}

/// Orders cells as numbers when both are, else as text.
fn compare(a: &Cell, b: &Cell) -> std::cmp::Ordering {
    let number = |c: &Cell| match c {
        Cell::Int(n) => Some(*n as f64),
        Cell::Float(f) => Some(*f),
        _ => None,
    };
    match (number(a), number(b)) {
        (Some(x), Some(y)) => x.total_cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Greater,
        (None, Some(_)) => std::cmp::Ordering::Less,
        (None, None) => format!("{a:?}").cmp(&format!("{b:?}")),
    }
}

/// Page-cache hits over lookups, from `sum(pages) by kind`: a lookup
/// that had to add its pages was a miss.
fn hit_ratio(answer: &Answer) -> Option<f64> {
    let mut pages = HashMap::new();
    for (i, row) in answer.rows.iter().enumerate() {
        if let Some(Cell::Int(n)) = row.get(1) {
            pages.insert(answer.text(i, 0, None), *n);
        }
    }
    let lookups = *pages.get("lookup").filter(|n| **n > 0)?;
    let adds = pages.get("add").copied().unwrap_or(0).min(lookups);
    Some((lookups - adds) as f64 / lookups as f64)
}

/// `1.2 MB`, `512 B`.
pub fn bytes(n: f64) -> String {
    match n {
        n if n >= 1e9 => format!("{:.1} GB", n / 1e9),
        n if n >= 1e6 => format!("{:.1} MB", n / 1e6),
        n if n >= 1e3 => format!("{:.1} kB", n / 1e3),
        n => format!("{n:.0} B"),
    }
}
