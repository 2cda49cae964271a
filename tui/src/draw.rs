//! Drawing: a pure function of [`State`]. Every view fits 80×24.

use std::fmt::Write as _;

use ratatui::{
    Frame,
    layout::{Constraint, Layout, Rect},
    style::{Color, Modifier, Style, Stylize as _},
    text::{Line, Span},
    widgets::{Block, Borders, Cell as TableCell, Clear, Paragraph, Row, Table, TableState, Wrap},
};
use weft_query::Answer;

use crate::{
    state::{State, View, WINDOWS, bytes},
    timeline,
};

/// Draws the whole screen.
pub fn draw(frame: &mut Frame, state: &State) {
    let error = input_error(state);
    let bottom = 1 + error.as_ref().map_or(0, |e| e.lines().count() as u16);
    let [top, body, status] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(bottom),
    ])
    .areas(frame.area());
    frame.render_widget(title(state), top);
    match state.view {
        View::Overview => overview(frame, state, body),
        View::Latency => latency(frame, state, body),
        View::Query => query(frame, state, body),
        View::Timeline => timeline(frame, state, body),
    }
    status_line(frame, state, status, error.as_deref());
    if state.help {
        help(frame, body);
    }
    if state.no_color {
        strip_colours(frame);
    }
}

/// Takes every colour off the frame; a cell that had a background (badges,
/// the losses line) turns to reverse video, so it still stands out.
fn strip_colours(frame: &mut Frame) {
    for cell in &mut frame.buffer_mut().content {
        if cell.bg != Color::Reset {
            cell.modifier.insert(Modifier::REVERSED);
        }
        cell.fg = Color::Reset;
        cell.bg = Color::Reset;
    }
}

fn title(state: &State) -> Line<'static> {
    let mut spans = vec![
        Span::styled(" weft ", Style::new().bold().reversed()),
        Span::raw(format!(" {} ", state.title)),
    ];
    // The current view by name, the others by their key: fits 80 columns.
    for (i, view) in View::ALL.iter().enumerate() {
        spans.push(if *view == state.view {
            Span::styled(
                format!(" {} {} ", i + 1, view.name()),
                Style::new().reversed(),
            )
        } else {
            Span::raw(format!(" {} ", i + 1))
        });
    }
    spans.push(Span::raw(format!(" window {}", WINDOWS[state.window].0)));
    if !state.live() {
        spans.push(Span::raw(format!(" @ {}", clock(state, state.cursor))));
    }
    if let Some(filter) = &state.filter {
        spans.push(Span::styled(
            format!(" process {filter}"),
            Style::new().cyan(),
        ));
    }
    if state.frozen {
        spans.push(Span::styled(" FROZEN ", Style::new().black().on_yellow()));
    }
    Line::from(spans)
}

/// A time of the capture to the millisecond: wall clock (UTC) when known,
/// else seconds since boot.
fn clock(state: &State, ns: u64) -> String {
    match state.wall_offset {
        Some(offset) => {
            let ms = (ns.cast_signed() + offset) / 1_000_000;
            let day = ms.rem_euclid(86_400_000);
            format!(
                "{:02}:{:02}:{:02}.{:03}",
                day / 3_600_000,
                day / 60_000 % 60,
                day / 1000 % 60,
                day % 1000
            )
        }
        None => format!("{:.3}s", ns as f64 / 1e9),
    }
}

fn overview(frame: &mut Frame, state: &State, area: Rect) {
    // The sources' table as tall as its rows, the heatmap below it in
    // what is left.
    let table_height = u16::try_from(state.sources.len())
        .unwrap_or(u16::MAX)
        .saturating_add(2);
    let table_height = table_height.min(area.height.saturating_sub(3));
    let table = if state.heatmap.is_some() {
        Constraint::Length(table_height)
    } else {
        Constraint::Min(table_height)
    };
    let [table_area, heat_area, health_area] =
        Layout::vertical([table, Constraint::Fill(1), Constraint::Length(3)]).areas(area);
    heatmap(frame, state, heat_area);
    let trend_width = (area.width as usize).saturating_sub(80).clamp(8, 60);
    let header = Row::new([
        "source",
        "records/s",
        "trend",
        "records",
        "lost",
        "headline",
    ])
    .style(Style::new().bold());
    let rows = state.sources.iter().map(|row| {
        let rate = row.rates.back().copied();
        let lost = TableCell::from(row.lost.to_string()).style(if row.lost > 0 {
            Style::new().white().on_red().bold()
        } else {
            Style::new()
        });
        Row::new(vec![
            TableCell::from(row.name.clone()),
            TableCell::from(rate.map_or("-".into(), rate_text)),
            TableCell::from(sparkline(row.rates.iter().copied(), trend_width)).green(),
            TableCell::from(row.received.to_string()),
            lost,
            TableCell::from(Line::from(vec![
                Span::raw(format!("{} ", row.headline)),
                // Its p99 over the last refreshes.
                Span::raw(sparkline(row.p99s.iter().copied(), trend_width)).yellow(),
            ])),
        ])
    });
    let widths = [
        Constraint::Length(10),
        Constraint::Length(10),
        Constraint::Length(trend_width as u16),
        Constraint::Length(11),
        Constraint::Length(8),
        Constraint::Min(26),
    ];
    let table = Table::new(rows, widths)
        .header(header)
        .block(Block::new().borders(Borders::TOP).title("sources"))
        .row_highlight_style(Style::new().reversed());
    let mut table_state = TableState::new().with_selected(Some(state.selected));
    frame.render_stateful_widget(table, table_area, &mut table_state);
    let h = &state.health;
    let rate: f64 = state.sources.iter().filter_map(|r| r.rates.back()).sum();
    let lost: u64 = state.sources.iter().map(|r| r.lost).sum();
    let mut text = format!(
        "drain lag {:.1} ms · ingest {}/s · disk {} · lost {lost}",
        h.drain_lag_ns as f64 / 1e6,
        rate_text(rate),
        bytes(h.disk_bytes as f64),
    );
    if h.pins_released > 0 {
        let _ = write!(text, " · kept windows released {}", h.pins_released);
    }
    // Its own cost, beside what it measures, on a line of its own.
    let mut costs = Vec::new();
    if let Some(permille) = h.cpu_permille {
        costs.push(format!("weft CPU {:.1}%", permille as f64 / 10.0));
    }
    if let Some(ns) = h.bpf_ns_per_syscall {
        costs.push(format!("its BPF programs {ns} ns a syscall (sampled)"));
    }
    let style = if lost > 0 || h.pins_released > 0 {
        Style::new().red()
    } else {
        Style::new()
    };
    frame.render_widget(
        Paragraph::new(vec![Line::from(text), Line::from(costs.join(" · "))])
            .style(style)
            .block(Block::new().borders(Borders::TOP).title("agent")),
        health_area,
    );
}

/// The selected source's latency heatmap, where it has one and the area
/// holds a few bands.
fn heatmap(frame: &mut Frame, state: &State, area: Rect) {
    const LABEL: usize = 9;
    let Some((query, answer)) = &state.heatmap else {
        return;
    };
    if area.height < 4 || area.width < 20 || state.heatmap_query().as_ref() != Some(query) {
        return;
    }
    let width = usize::from(area.width) - LABEL - 1;
    let height = usize::from(area.height) - 2;
    let Some(heat) = crate::heatmap::lay_out(answer, width, height) else {
        return;
    };
    let field = query
        .split("hist(")
        .nth(1)
        .and_then(|f| f.split(')').next());
    let source = &state.sources[state.selected].name;
    let approximate = if answer.approximate.is_some() {
        " (≈ from summaries where records were deleted)"
    } else {
        ""
    };
    let title = format!(
        "{source} {} heatmap, {}{approximate}: time →, latency ↑, darker = more",
        field.unwrap_or_default(),
        WINDOWS[state.window].0
    );
    let mut lines: Vec<Line> = heat
        .bands
        .iter()
        .map(|(lower, shades)| {
            let label = weft_query::answer::duration(*lower as f64);
            Line::from(vec![
                Span::raw(format!("{label:>w$} ", w = LABEL - 1)),
                Span::raw(shades.clone()).yellow(),
            ])
        })
        .collect();
    lines.push(Line::from(format!(
        "{:>w$}{:>c$}",
        "",
        "now",
        w = LABEL,
        c = heat.columns
    )));
    frame.render_widget(
        Paragraph::new(lines).block(Block::new().borders(Borders::TOP).title(title)),
        area,
    );
}

fn rate_text(rate: f64) -> String {
    match rate {
        r if r >= 1e6 => format!("{:.2}M", r / 1e6),
        r if r >= 1e4 => format!("{:.1}k", r / 1e3),
        r => format!("{r:.0}"),
    }
}

/// The last `width` values as block characters scaled to their maximum.
pub fn sparkline(values: impl DoubleEndedIterator<Item = f64>, width: usize) -> String {
    let mut last: Vec<f64> = values.rev().take(width).collect();
    last.reverse();
    let max = last.iter().copied().fold(0.0, f64::max);
    last.iter().map(|v| bar(*v, max)).collect()
}

/// A block character as high as `value` is of `max` (the lowest for 0).
fn bar(value: f64, max: f64) -> char {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    if max <= 0.0 {
        return BARS[0];
    }
    let level = ((value / max) * 7.0).round().clamp(0.0, 7.0);
    #[expect(clippy::cast_sign_loss, reason = "clamped to 0..=7")]
    BARS[level as usize]
}

fn latency(frame: &mut Frame, state: &State, area: Rect) {
    let hist_height = if area.height >= 16 {
        area.height / 2
    } else {
        0
    };
    let [table_area, hist_area] =
        Layout::vertical([Constraint::Min(3), Constraint::Length(hist_height)]).areas(area);
    let breakdown = state.breakdown();
    // Past the kept records, the summaries kept of them answer: say so.
    let approximate = match &state.latency {
        Some(Ok(answer)) if answer.approximate.is_some() => ", ≈ from summaries of deleted records",
        _ => "",
    };
    let title = format!(
        "{} {} by {}, last {}{approximate} (o: source, s r: sort, Enter: slowest)",
        breakdown.source, breakdown.field, breakdown.key, WINDOWS[state.window].0
    );
    let block = Block::new().borders(Borders::TOP).title(title);
    match &state.latency {
        None => frame.render_widget(Paragraph::new("waiting for data…").block(block), table_area),
        Some(Err(error)) => {
            frame.render_widget(Paragraph::new(error.clone()).red().block(block), table_area);
        }
        Some(Ok(answer)) => {
            let order = state.latency_rows();
            let marked = |i: usize, name: &str| {
                if i == state.sort.column {
                    format!("{name}{}", if state.sort.descending { "▼" } else { "▲" })
                } else {
                    name.to_owned()
                }
            };
            let names = [breakdown.key, "count", "p50", "p90", "p99", "p99.9", "max"];
            let header = Row::new(names.iter().enumerate().map(|(i, n)| marked(i, n)))
                .style(Style::new().bold());
            let rows = order.iter().map(|&row| {
                Row::new((0..answer.columns.len()).map(|c| answer.text(row, c, state.wall_offset)))
            });
            let mut widths = vec![Constraint::Length(18)];
            widths.extend([Constraint::Length(10); 6]);
            let table = Table::new(rows, widths)
                .header(header)
                .block(block)
                .row_highlight_style(Style::new().reversed());
            let mut table_state = TableState::new().with_selected(Some(state.selected));
            frame.render_stateful_widget(table, table_area, &mut table_state);
        }
    }
    if hist_height > 0 {
        hist(frame, state, hist_area);
    }
}

/// Every source's records on one axis around the anchor.
fn timeline(frame: &mut Frame, state: &State, area: Rect) {
    let t = &state.timeline;
    let span = t.span_ns() / 1_000_000_000;
    let Some(anchor) = &t.anchor else {
        let block = Block::new().borders(Borders::TOP).title("timeline");
        let text =
            "finding the slowest syscall of the window… (or press t on a record in the query view)";
        frame.render_widget(Paragraph::new(text).block(block), area);
        return;
    };
    let title = format!(
        "around {} {} ±{span}s (+ - zoom, a, Enter)",
        clock(state, anchor.time),
        anchor.what
    );
    // Names as wide as the longest (another host's `HOST:source` in a
    // fleet), within reason.
    let name = (t.series.iter())
        .map(|s| s.source.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(10, 48);
    let mut lines = Vec::new();
    for (i, series) in t.series.iter().enumerate() {
        let max = series.counts.iter().copied().max().unwrap_or(0);
        let strip: String = series
            .counts
            .iter()
            .map(|&n| match n {
                0 => ' ',
                n => bar(n as f64, max as f64),
            })
            .collect();
        let total: u64 = series.counts.iter().sum();
        let style = if i == state.selected {
            Style::new().reversed()
        } else {
            Style::new()
        };
        lines.push(Line::from(vec![
            Span::styled(format!("{:<name$.name$}", series.source), style),
            Span::styled(format!("│{strip}│"), Style::new().green()),
            Span::raw(format!(" {total}")),
        ]));
    }
    let half = timeline::COLUMNS / 2;
    lines.push(Line::from(format!(
        "{:<name$}└{}▲{}┘",
        "",
        "─".repeat(half - 1),
        "─".repeat(timeline::COLUMNS - half)
    )));
    let label = format!("-{span}s");
    lines.push(Line::from(format!(
        "{:<w0$}{label:<w$}{:^3}{:>w2$}",
        "",
        "0",
        format!("+{span}s"),
        w0 = name + 1,
        w = half - 2,
        w2 = timeline::COLUMNS - half - 1
    )));
    let block = Block::new().borders(Borders::TOP).title(title);
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

/// The selected syscall's latency histogram.
fn hist(frame: &mut Frame, state: &State, area: Rect) {
    let name = state.selected_key().unwrap_or_default();
    let block = Block::new()
        .borders(Borders::TOP)
        .title(format!("{name} {} histogram", state.breakdown().field));
    let Some(answer) = &state.hist else {
        frame.render_widget(Paragraph::new("").block(block), area);
        return;
    };
    let max = answer
        .rows
        .iter()
        .filter_map(|r| match r.get(2) {
            Some(weft_query::Cell::Int(n)) => Some(*n),
            _ => None,
        })
        .max()
        .unwrap_or(0)
        .max(1);
    let bar_width = (area.width as usize).saturating_sub(34).max(4);
    let lines: Vec<Line> = answer
        .rows
        .iter()
        .enumerate()
        .map(|(i, row)| {
            let count = match row.get(2) {
                Some(weft_query::Cell::Int(n)) => *n,
                _ => 0,
            };
            let width =
                (count.unsigned_abs() as usize * bar_width).div_ceil(max.unsigned_abs() as usize);
            Line::from(vec![
                Span::raw(format!(
                    "{:>9} .. {:<9} {:>9} ",
                    answer.text(i, 0, None),
                    answer.text(i, 1, None),
                    count
                )),
                Span::styled("█".repeat(width), Style::new().green()),
            ])
        })
        .collect();
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

fn query(frame: &mut Frame, state: &State, area: Rect) {
    let Some((text, answer)) = &state.result else {
        let hint = "Press : to ask a question, e.g.\n  syscalls | count, p99(dur) by name last 60s\n  syscalls where dur > p99.99 last 60s\n  sched around (syscalls | max(dur) last 60s) within 5s";
        frame.render_widget(
            Paragraph::new(hint).block(Block::new().borders(Borders::TOP).title("query")),
            area,
        );
        return;
    };
    let block = Block::new().borders(Borders::TOP).title(text.clone());
    match answer {
        Err(error) => frame.render_widget(
            Paragraph::new(error.clone())
                .red()
                .wrap(Wrap { trim: false })
                .block(block),
            area,
        ),
        Ok(answer) => answer_table(frame, state, answer, block, area),
    }
}

/// An answer as a scrollable table, columns as wide as their content.
fn answer_table(frame: &mut Frame, state: &State, answer: &Answer, block: Block, area: Rect) {
    let texts: Vec<Vec<String>> = (0..answer.rows.len())
        .map(|r| {
            (0..answer.columns.len())
                .map(|c| answer.text(r, c, state.wall_offset))
                .collect()
        })
        .collect();
    let widths: Vec<Constraint> = answer
        .columns
        .iter()
        .enumerate()
        .map(|(c, header)| {
            let widest = texts
                .iter()
                .map(|row| row[c].chars().count())
                .chain([header.name.chars().count()])
                .max()
                .unwrap_or(1);
            Constraint::Length(widest.min(40) as u16)
        })
        .collect();
    let header = Row::new(answer.columns.iter().map(|h| h.name.clone())).style(Style::new().bold());
    let count = texts.len();
    let table = Table::new(texts.into_iter().map(Row::new), widths)
        .header(header)
        .block(block.title_bottom(format!("{count} rows")))
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED));
    let mut table_state = TableState::new().with_selected(Some(state.selected));
    frame.render_stateful_widget(table, area, &mut table_state);
}

/// The query's error, shown above the query bar while it is open, its
/// caret moved under the token in the bar (the error's own copy of the
/// query is left out).
fn input_error(state: &State) -> Option<String> {
    let input = state.input.as_ref()?;
    let Some((query, Err(error))) = &state.result else {
        return None;
    };
    if query != input.text.trim() {
        return None;
    }
    let echo = format!("  {query}");
    let pad = " ".repeat(input.prompt().chars().count());
    let lines: Vec<String> = error
        .lines()
        .filter(|line| *line != echo)
        .map(|line| match line.strip_prefix("  ") {
            Some(caret) if caret.trim_start().starts_with('^') => format!("{pad}{caret}"),
            _ => line.to_owned(),
        })
        .collect();
    Some(lines.join("\n"))
}

fn status_line(frame: &mut Frame, state: &State, area: Rect, error: Option<&str>) {
    let mut lines: Vec<Line> = error
        .iter()
        .flat_map(|e| e.lines().map(|l| Line::from(l.to_owned()).red()))
        .collect();
    if let Some(input) = &state.input {
        lines.push(Line::from(format!("{}{}", input.prompt(), input.text)));
        let x = area.x + (input.prompt().chars().count() + input.cursor) as u16;
        frame.set_cursor_position((x.min(area.right().saturating_sub(1)), area.bottom() - 1));
    } else if !state.message.is_empty() {
        lines.push(Line::from(state.message.clone()).yellow());
    } else {
        let keys = if state.live() {
            "q quit  ? help  : query  / process  f freeze  w window  Tab view"
        } else {
            "q quit  ? help  : query  / process  [ ] move in time  w window  Tab view"
        };
        lines.push(Line::from(keys).dark_gray());
    }
    frame.render_widget(Paragraph::new(lines), area);
}

const HELP: &str = "\
1 2 3 4, Tab overview, latency, query, timeline views
:            query bar (Tab completes, Up/Down history, Esc closes)
/            show one process only (empty: all)
w            window: 10s, 1m, 5m, 1h
[ ]          move back/forward in time (recordings)
f            freeze the display (capture continues)
s r o        sort by the next column, reverse, next source (latency)
Up Down      select; mouse wheel scrolls
Enter        drill down: slowest calls, the thread around a record
t            timeline around the selected record (query view)
p            capture Intel PT of the selected record's process (live)
e            where the time went: a syscall's slowest 1 %, a listed call
+ - a        zoom the timeline, centre it on the slowest syscall
q Ctrl-C     quit";

fn help(frame: &mut Frame, area: Rect) {
    let width = 76.min(area.width);
    let height = (HELP.lines().count() as u16 + 2).min(area.height);
    let popup = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    };
    frame.render_widget(Clear, popup);
    frame.render_widget(
        // No colours anywhere (NO_COLOR, light terminals): emphasis is
        // reverse video and borders.
        Paragraph::new(HELP).block(Block::bordered().title("keys")),
        popup,
    );
}
