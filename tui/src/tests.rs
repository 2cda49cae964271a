//! The UI without a terminal: state changes from keys and answers, and
//! what each view shows at 80×24 and 200×60.

use ratatui::{
    Terminal,
    backend::TestBackend,
    crossterm::event::{KeyCode, KeyEvent, KeyModifiers},
};
use weft_query::{
    Answer, Cell, Header, Kind,
    feed::Feed,
    health::{Health, SourceHealth},
};

use crate::{
    State, draw,
    state::{Effect, Job, View},
};

struct Fake {
    range: Option<(u64, u64)>,
}

impl Feed for Fake {
    fn ask(&self, _: &str) -> Result<Answer, String> {
        Ok(Answer::default())
    }
    fn health(&self) -> Health {
        Health::default()
    }
    fn schema(&self) -> Vec<(String, Vec<String>)> {
        vec![(
            "syscalls".into(),
            vec!["dur".into(), "name".into(), "tid".into()],
        )]
    }
    fn range(&self) -> Option<(u64, u64)> {
        self.range
    }
    fn title(&self) -> String {
        "test".into()
    }
    fn wall_offset(&self) -> Option<i64> {
        None
    }
}

fn live() -> State {
    State::new(&Fake { range: None })
}

fn key(state: &mut State, code: KeyCode) -> Effect {
    state.key(KeyEvent::new(code, KeyModifiers::NONE))
}

fn typed(state: &mut State, text: &str) {
    for c in text.chars() {
        key(state, KeyCode::Char(c));
    }
}

fn answer(columns: &[(&str, Kind)], rows: Vec<Vec<Cell>>) -> Answer {
    Answer {
        columns: columns
            .iter()
            .map(|(name, kind)| Header {
                name: (*name).into(),
                kind: kind.clone(),
            })
            .collect(),
        rows,
        ..Answer::default()
    }
}

/// `count, p50 … max by name` for read (10 calls, slow), write (30, fast)
/// and getppid (20).
fn latency_answer() -> Answer {
    let d = Kind::Duration;
    let row = |name: &str, count, p50| {
        let mut row = vec![Cell::Text(name.into()), Cell::Int(count)];
        row.extend([p50, p50 * 2, p50 * 3, p50 * 4, p50 * 5].map(Cell::Int));
        row
    };
    answer(
        &[
            ("name", Kind::Int),
            ("count", Kind::Int),
            ("p50(dur)", d.clone()),
            ("p90(dur)", d.clone()),
            ("p99(dur)", d.clone()),
            ("p99.9(dur)", d.clone()),
            ("max(dur)", d),
        ],
        vec![
            row("read", 10, 9_000_000),
            row("write", 30, 800),
            row("getppid", 20, 300),
        ],
    )
}

fn with_latency() -> State {
    let mut state = live();
    let query = state.latency_query();
    state.apply(Job::Latency(query), Ok(latency_answer()));
    state
}

fn health(received: &[(&str, u64, u64)]) -> Health {
    Health {
        sources: received
            .iter()
            .map(|(name, received, lost)| SourceHealth {
                name: (*name).into(),
                received: *received,
                lost: *lost,
            })
            .collect(),
        drain_lag_ns: 4_200_000,
        disk_bytes: 3_500_000,
        pins_released: 0,
        cpu_permille: Some(23),
        bpf_ns_per_syscall: Some(91),
        ended: false,
    }
}

/// The screen as lines of text.
fn screen(state: &State, width: u16, height: u16) -> Vec<String> {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|frame| draw::draw(frame, state)).unwrap();
    let buffer = terminal.backend().buffer();
    (0..height)
        .map(|y| (0..width).map(|x| buffer[(x, y)].symbol()).collect())
        .collect()
}

fn line_with<'a>(lines: &'a [String], text: &str) -> &'a str {
    lines
        .iter()
        .find(|l| l.contains(text))
        .unwrap_or_else(|| panic!("no line with `{text}`:\n{}", lines.join("\n")))
}

#[test]
fn latency_rows_sort_by_count_then_by_the_chosen_column() {
    let mut state = with_latency();
    let names = |state: &State| -> Vec<String> {
        let Some(Ok(answer)) = &state.latency else {
            panic!()
        };
        state
            .latency_rows()
            .iter()
            .map(|&r| answer.text(r, 0, None))
            .collect()
    };
    assert_eq!(names(&state), ["write", "getppid", "read"]);
    state.view = View::Latency;
    key(&mut state, KeyCode::Char('s'));
    assert_eq!(
        names(&state),
        ["read", "write", "getppid"],
        "p50 descending"
    );
    key(&mut state, KeyCode::Char('r'));
    assert_eq!(names(&state), ["getppid", "write", "read"]);
}

#[test]
fn enter_on_a_syscall_asks_for_its_slowest_calls() {
    let mut state = with_latency();
    key(&mut state, KeyCode::Char('2'));
    assert_eq!(key(&mut state, KeyCode::Down), Effect::Refresh);
    assert_eq!(state.selected_key().as_deref(), Some("getppid"));
    assert!(state.refresh_jobs().contains(&Job::Hist(
        r#"syscalls where name = "getppid" | hist(dur) last 10s"#.into()
    )));
    let Effect::Run(Job::User(query)) = key(&mut state, KeyCode::Enter) else {
        panic!("Enter runs a query")
    };
    assert_eq!(
        query,
        r#"syscalls where name = "getppid" | sort dur desc | limit 100 last 10s"#
    );
    assert_eq!(state.view, View::Query);
    assert_eq!(state.history, [query]);
}

#[test]
fn a_listed_record_drills_to_its_thread_around_it() {
    let mut state = live();
    let records = answer(
        &[
            ("time", Kind::Time),
            ("tid", Kind::Int),
            ("dur", Kind::Duration),
        ],
        vec![vec![Cell::Int(5_000_000_000), Cell::Int(42), Cell::Int(7)]],
    );
    state.apply(Job::User("syscalls | limit 1".into()), Ok(records));
    key(&mut state, KeyCode::Char('3'));
    assert_eq!(
        key(&mut state, KeyCode::Enter),
        Effect::Run(Job::User(
            "syscalls where tid = 42 [4000000000, 6000000000]".into()
        ))
    );
}

#[test]
fn e_explains_a_syscall_s_slowest_calls_and_a_listed_call() {
    let mut state = with_latency();
    key(&mut state, KeyCode::Char('2'));
    key(&mut state, KeyCode::Down);
    assert_eq!(
        key(&mut state, KeyCode::Char('e')),
        Effect::Run(Job::User(
            r#"syscalls where name = "getppid" and dur > p99 last 10s | explain"#.into()
        ))
    );
    assert_eq!(state.view, View::Query);
    let records = answer(
        &[
            ("time", Kind::Time),
            ("tid", Kind::Int),
            ("name", Kind::Int),
            ("dur", Kind::Duration),
        ],
        vec![vec![
            Cell::Int(90_000_000_000),
            Cell::Int(42),
            Cell::Text("fsync".into()),
            Cell::Int(7_000_000),
        ]],
    );
    state.apply(Job::User("syscalls | limit 1".into()), Ok(records.clone()));
    assert_eq!(
        key(&mut state, KeyCode::Char('e')),
        Effect::Run(Job::User(
            r#"syscalls where tid = 42 and name = "fsync" and dur >= 7000000 [30000000000, 150000000000] | explain"#
                .into()
        ))
    );
    // Records of another source, or the overview: nothing to explain.
    state.apply(Job::User("sched | limit 1".into()), Ok(records));
    assert_eq!(key(&mut state, KeyCode::Char('e')), Effect::None);
    assert!(state.message.starts_with("e explains"), "{}", state.message);
}

#[test]
fn a_query_over_a_window_with_losses_says_how_many_records_it_lacks() {
    let mut state = live();
    let mut counted = answer(&[("count", Kind::Int)], vec![vec![Cell::Int(10)]]);
    counted.lost = 7;
    state.apply(Job::User("syscalls | count".into()), Ok(counted));
    assert_eq!(
        state.message,
        "7 records of this source were lost in this window: the answer lacks them"
    );
    state.apply(Job::User("syscalls | count".into()), Ok(Answer::default()));
    assert!(state.message.is_empty(), "{}", state.message);
}

#[test]
fn an_answer_from_summaries_of_deleted_records_says_it_is_approximate() {
    let mut state = live();
    let mut counted = answer(&[("count", Kind::Int)], vec![vec![Cell::Int(10)]]);
    counted.approximate = Some("the records of 4 deleted chunks …".into());
    state.apply(Job::User("syscalls | count last 1h".into()), Ok(counted));
    assert_eq!(
        state.message,
        "approximate: the records of 4 deleted chunks …"
    );
    // The latency view's title says so too, over the 1h window.
    for _ in 0..3 {
        key(&mut state, KeyCode::Char('w'));
    }
    assert!(state.latency_query().ends_with("last 1h"));
    let mut table = latency_answer();
    table.approximate = Some("…".into());
    state.apply(Job::Latency(state.latency_query()), Ok(table));
    key(&mut state, KeyCode::Char('2'));
    let lines = screen(&state, 120, 30);
    let title = line_with(&lines, "dur by name");
    assert!(
        title.contains("last 1h, ≈ from summaries of deleted records"),
        "{title}"
    );
}

#[test]
fn answers_to_outdated_queries_and_refreshes_while_frozen_are_dropped() {
    let mut state = live();
    let old = state.latency_query();
    assert_eq!(key(&mut state, KeyCode::Char('w')), Effect::Refresh);
    assert!(state.latency_query().ends_with("last 1m"));
    state.apply(Job::Latency(old), Ok(latency_answer()));
    assert!(
        state.latency.is_none(),
        "the 10s answer is not the 1m table"
    );
    key(&mut state, KeyCode::Char('f'));
    state.apply(Job::Latency(state.latency_query()), Ok(latency_answer()));
    state.apply_health(health(&[("syscalls", 10, 0)]), 1.0);
    assert!(
        state.latency.is_none() && state.sources.is_empty(),
        "frozen"
    );
    state.apply(Job::User("q".into()), Ok(Answer::default()));
    assert!(state.result.is_some(), "the user's own query still answers");
    assert_eq!(key(&mut state, KeyCode::Char('f')), Effect::Refresh);
}

#[test]
fn rates_come_from_received_counts_between_samples() {
    let mut state = live();
    state.apply_health(health(&[("syscalls", 100, 0)]), 0.0);
    state.apply_health(health(&[("syscalls", 300, 0), ("sched", 4, 1)]), 2.0);
    state.apply_health(health(&[("syscalls", 1300, 0), ("sched", 4, 1)]), 3.0);
    let syscalls = &state.sources[0];
    assert_eq!(syscalls.rates, [100.0, 1000.0]);
    assert_eq!((syscalls.received, state.sources[1].lost), (1300, 1));
}

#[test]
fn refresh_asks_for_the_latency_table_only_while_it_is_shown() {
    let mut state = live();
    state.apply_health(health(&[("syscalls", 1, 0)]), 0.0);
    let latency = |state: &State| {
        state
            .refresh_jobs()
            .iter()
            .any(|j| matches!(j, Job::Latency(_)))
    };
    assert!(!latency(&state), "the overview shows no latency table");
    assert_eq!(key(&mut state, KeyCode::Char('2')), Effect::Refresh);
    assert!(latency(&state));
    key(&mut state, KeyCode::Char('1'));
    assert!(!latency(&state));
    assert!(
        state
            .refresh_jobs()
            .iter()
            .any(|j| matches!(j, Job::Headline(source, _) if source == "syscalls"))
    );
}

#[test]
fn the_process_filter_narrows_every_syscall_query() {
    let mut state = live();
    state.apply_health(health(&[("syscalls", 1, 0), ("sched", 1, 0)]), 0.0);
    key(&mut state, KeyCode::Char('/'));
    typed(&mut state, "redis*");
    assert_eq!(key(&mut state, KeyCode::Enter), Effect::Refresh);
    assert_eq!(state.filter.as_deref(), Some("redis*"));
    let jobs = state.refresh_jobs();
    for job in &jobs {
        if job.query().starts_with("syscalls") {
            assert!(job.query().contains(r#"where comm ~ "redis*""#), "{job:?}");
        }
    }
    assert!(jobs.iter().any(|j| j.query().starts_with("sched |")));
    key(&mut state, KeyCode::Char('/'));
    for _ in 0..6 {
        key(&mut state, KeyCode::Backspace);
    }
    key(&mut state, KeyCode::Enter);
    assert_eq!(state.filter, None, "an empty filter shows every process");
}

#[test]
fn a_recording_moves_its_cursor_by_windows_within_its_range() {
    let s = 1_000_000_000;
    let mut state = State::new(&Fake {
        range: Some((5 * s, 30 * s)),
    });
    assert_eq!(state.window_clause(), format!("[{}, {}]", 20 * s, 30 * s));
    assert_eq!(key(&mut state, KeyCode::Char('[')), Effect::Refresh);
    assert_eq!(state.cursor, 20 * s);
    key(&mut state, KeyCode::Char('['));
    key(&mut state, KeyCode::Char('['));
    assert_eq!(state.cursor, 5 * s, "not before the first record");
    key(&mut state, KeyCode::Char('w'));
    key(&mut state, KeyCode::Char(']'));
    assert_eq!(state.cursor, 30 * s, "not after the last");
}

#[test]
fn the_query_bar_runs_keeps_history_and_completes() {
    let mut state = live();
    key(&mut state, KeyCode::Char(':'));
    typed(&mut state, "sys");
    key(&mut state, KeyCode::Tab);
    typed(&mut state, "| count");
    assert_eq!(
        key(&mut state, KeyCode::Enter),
        Effect::Run(Job::User("syscalls | count".into()))
    );
    key(&mut state, KeyCode::Char(':'));
    key(&mut state, KeyCode::Up);
    assert_eq!(state.input.as_ref().unwrap().text, "syscalls | count");
    key(&mut state, KeyCode::Esc);
    assert!(state.input.is_none());
    assert_eq!(key(&mut state, KeyCode::Char('q')), Effect::None);
    assert!(state.quit);
}

#[test]
fn headlines_say_what_matters_per_source() {
    let mut state = live();
    state.apply_health(
        health(&[("syscalls", 1, 0), ("pagecache", 1, 0), ("net", 1, 0)]),
        0.0,
    );
    let jobs = state.refresh_jobs();
    let query = |source: &str| {
        jobs.iter()
            .find_map(|j| match j {
                Job::Headline(s, q) if s == source => Some(q.clone()),
                _ => None,
            })
            .unwrap()
    };
    let pages = answer(
        &[("kind", Kind::Int), ("sum(pages)", Kind::Int)],
        vec![
            vec![Cell::Text("lookup".into()), Cell::Int(200)],
            vec![Cell::Text("add".into()), Cell::Int(50)],
        ],
    );
    state.apply(
        Job::Headline("pagecache".into(), query("pagecache")),
        Ok(pages),
    );
    let net = answer(
        &[("count", Kind::Int), ("sum(len)", Kind::Int)],
        vec![vec![Cell::Int(1000), Cell::Int(15_000_000)]],
    );
    state.apply(Job::Headline("net".into(), query("net")), Ok(net));
    let calls = answer(
        &[("count", Kind::Int), ("p99(dur)", Kind::Duration)],
        vec![vec![Cell::Int(5), Cell::Int(2_500)]],
    );
    state.apply(
        Job::Headline("syscalls".into(), query("syscalls")),
        Ok(calls),
    );
    let headlines: Vec<&str> = state.sources.iter().map(|r| r.headline.as_str()).collect();
    assert_eq!(
        headlines,
        ["p99 2.50us", "hit ratio 75.0%", "100 packets/s, 1.5 MB/s"]
    );
    // The p99 of each refresh makes a trend beside it.
    let slower = answer(
        &[("count", Kind::Int), ("p99(dur)", Kind::Duration)],
        vec![vec![Cell::Int(5), Cell::Int(10_000)]],
    );
    state.apply(
        Job::Headline("syscalls".into(), query("syscalls")),
        Ok(slower),
    );
    assert_eq!(state.sources[0].p99s, [2_500.0, 10_000.0]);
    assert!(state.sources[1].p99s.is_empty());
    for (width, height) in [(80, 24), (200, 60)] {
        let lines = screen(&state, width, height);
        assert!(line_with(&lines, "p99 10.0us").contains("▃█"), "{lines:#?}");
    }
}

#[test]
fn overview_shows_rates_losses_and_agent_health() {
    let mut state = live();
    state.apply_health(health(&[("syscalls", 0, 0), ("sched", 0, 0)]), 0.0);
    state.apply_health(
        health(&[("syscalls", 2_000_000, 0), ("sched", 500, 3)]),
        1.0,
    );
    for (width, height) in [(80, 24), (200, 60)] {
        let lines = screen(&state, width, height);
        assert!(lines[0].contains("1 Overview  2  3  4") && lines[0].contains("window 10s"));
        let syscalls = line_with(&lines, "syscalls");
        assert!(
            syscalls.contains("2.00M") && syscalls.contains("2000000"),
            "{syscalls}"
        );
        let sched = line_with(&lines, "sched ");
        assert!(
            sched.contains("500") && sched.trim_end().ends_with('3'),
            "{sched}"
        );
        let agent = line_with(&lines, "drain lag");
        assert!(agent.contains("4.2 ms") && agent.contains("3.5 MB") && agent.contains("lost 3"));
        let costs = line_with(&lines, "weft CPU");
        assert!(
            costs.contains("weft CPU 2.3% · its BPF programs 91 ns a syscall (sampled)"),
            "{costs}"
        );
        assert!(!agent.contains("released"), "{agent}");
        assert!(lines[usize::from(height) - 1].contains("q quit"));
    }
    // Kept windows the budget released are shown, as losses are.
    let mut released = health(&[("syscalls", 2_000_000, 0), ("sched", 500, 3)]);
    released.pins_released = 2;
    state.apply_health(released, 2.0);
    let lines = screen(&state, 200, 60);
    let agent = line_with(&lines, "drain lag");
    assert!(agent.contains("kept windows released 2"), "{agent}");
}

#[test]
fn latency_view_shows_percentiles_and_the_selected_histogram() {
    let mut state = with_latency();
    key(&mut state, KeyCode::Char('2'));
    let hist = answer(
        &[
            ("from", Kind::Duration),
            ("to", Kind::Duration),
            ("count", Kind::Int),
        ],
        vec![
            vec![Cell::Int(512), Cell::Int(1024), Cell::Int(28)],
            vec![Cell::Int(1024), Cell::Int(2048), Cell::Int(2)],
        ],
    );
    let query = match &state.refresh_jobs()[1] {
        Job::Hist(q) => q.clone(),
        other => panic!("{other:?}"),
    };
    state.apply(Job::Hist(query), Ok(hist));
    for (width, height) in [(80, 24), (200, 60)] {
        let lines = screen(&state, width, height);
        assert!(line_with(&lines, "count▼").contains("p99.9"));
        let read = line_with(&lines, "read ");
        for value in ["10", "9.00ms", "18.0ms", "27.0ms", "36.0ms", "45.0ms"] {
            assert!(read.contains(value), "{value} in {read}");
        }
        assert!(line_with(&lines, "dur histogram").contains("write"));
        let bucket = line_with(&lines, "512ns");
        assert!(bucket.contains("1.02us") && bucket.contains("28") && bucket.contains('█'));
    }
}

#[test]
fn query_view_shows_answers_and_errors_with_their_caret() {
    let mut state = live();
    key(&mut state, KeyCode::Char(':'));
    typed(&mut state, "syscalls | p99(bogus)");
    key(&mut state, KeyCode::Enter);
    let error = "no field `bogus` in syscalls\n  syscalls | p99(bogus)\n                 ^^^^^";
    state.apply(Job::User("syscalls | p99(bogus)".into()), Err(error.into()));
    let lines = screen(&state, 80, 24);
    assert_eq!(
        lines[23].trim_end(),
        ":syscalls | p99(bogus)",
        "back in the bar"
    );
    assert_eq!(
        lines[22].trim_end(),
        "                ^^^^^",
        "under the token"
    );
    assert_eq!(lines[21].trim_end(), "no field `bogus` in syscalls");
    key(&mut state, KeyCode::Esc);
    let counts = answer(
        &[("name", Kind::Int), ("count", Kind::Int)],
        vec![
            vec![Cell::Text("getppid".into()), Cell::Int(777)],
            vec![Cell::Text("read".into()), Cell::Int(4)],
        ],
    );
    state.apply(Job::User("syscalls | count by name".into()), Ok(counts));
    for (width, height) in [(80, 24), (200, 60)] {
        let lines = screen(&state, width, height);
        assert!(line_with(&lines, "getppid").contains("777"));
        line_with(&lines, "2 rows");
    }
}

#[test]
fn help_lists_the_keys_over_any_view() {
    let mut state = with_latency();
    key(&mut state, KeyCode::Char('?'));
    let lines = screen(&state, 80, 24);
    // Each key beside what it does ("freeze" holds an f by itself).
    assert!(line_with(&lines, "freeze").contains("│f            freeze"));
    assert!(line_with(&lines, "query bar").contains("│:            query bar"));
    assert_eq!(key(&mut state, KeyCode::Char('x')), Effect::None);
    assert!(!state.help && !state.quit, "any key closes the help");
}

/// With `NO_COLOR` set, no cell of any view, or of the help over it, has a
/// colour; the same views do have colours without it.
#[test]
fn no_color_draws_every_view_without_colours() {
    let mut state = with_latency();
    let colours = |state: &State| -> usize {
        let mut terminal = Terminal::new(TestBackend::new(100, 30)).unwrap();
        terminal.draw(|frame| draw::draw(frame, state)).unwrap();
        let reset = ratatui::style::Color::Reset;
        let buffer = terminal.backend().buffer();
        buffer
            .content
            .iter()
            .filter(|c| c.fg != reset || c.bg != reset)
            .count()
    };
    let mut coloured = 0;
    for view in ['1', '2', '3', '4', '5', '?'] {
        key(&mut state, KeyCode::Char(view));
        state.no_color = false;
        coloured += colours(&state);
        state.no_color = true;
        assert_eq!(colours(&state), 0, "view {view}");
    }
    assert!(coloured > 0, "the views have colours to take off");
}

#[test]
fn frame_times_keep_median_and_max() {
    use std::time::Duration;
    let mut frames = crate::FrameTimes::default();
    for ms in [1, 2, 3, 250] {
        frames.add(Duration::from_micros(ms * 1000 - 50));
    }
    frames.add(Duration::from_micros(2_950));
    assert_eq!(frames.count, 5);
    assert_eq!(frames.median(), Duration::from_millis(3), "third of five");
    assert_eq!(frames.max, Duration::from_micros(249_950));
}

#[test]
fn the_timeline_centres_on_the_slowest_syscall_and_counts_every_source() {
    let s: u64 = 1_000_000_000;
    let t = 100 * s;
    let mut state = live();
    state.apply_health(
        health(&[("syscalls", 1, 0), ("sched", 1, 0), ("tasks", 1, 0)]),
        0.0,
    );
    assert_eq!(key(&mut state, KeyCode::Char('4')), Effect::Refresh);
    let anchor_query = "syscalls | sort dur desc | limit 1 last 10s";
    assert!(
        state
            .refresh_jobs()
            .contains(&Job::Anchor(anchor_query.into()))
    );
    let slowest = answer(
        &[
            ("time", Kind::Time),
            ("name", Kind::Int),
            ("dur", Kind::Duration),
        ],
        vec![vec![
            Cell::Int(t.cast_signed()),
            Cell::Text("read".into()),
            Cell::Int(1_200_000_000),
        ]],
    );
    assert_eq!(
        state.apply(Job::Anchor(anchor_query.into()), Ok(slowest)),
        Effect::Refresh
    );
    let jobs: Vec<Job> = state
        .refresh_jobs()
        .into_iter()
        .filter(|j| matches!(j, Job::Timeline(..)))
        .collect();
    let range = format!("[{}, {}]", t - 5 * s, t + 5 * s);
    assert_eq!(
        jobs,
        [
            Job::Timeline(
                "syscalls".into(),
                format!("syscalls | count every 166666us {range}")
            ),
            Job::Timeline(
                "sched".into(),
                format!("sched | count every 166666us {range}")
            ),
        ],
        "every source but thread names"
    );
    let bucket = 166_666_666_i64;
    let counts = answer(
        &[("time", Kind::Time), ("count", Kind::Int)],
        vec![
            vec![Cell::Int((t - 5 * s).cast_signed() - 1000), Cell::Int(7)],
            vec![Cell::Int(t.cast_signed()), Cell::Int(70)],
            vec![Cell::Int((t + 5 * s).cast_signed() - bucket), Cell::Int(1)],
        ],
    );
    state.apply(jobs[0].clone(), Ok(counts));
    let series = &state.timeline.series[0].counts;
    assert_eq!((series[0], series[30], series[59]), (7, 70, 1));
    assert_eq!(series.iter().sum::<u64>(), 78);
    for (width, height) in [(80, 24), (200, 60)] {
        let lines = screen(&state, width, height);
        assert!(line_with(&lines, "around").contains("read 1.20s ±5s"));
        let row = line_with(&lines, "syscalls ");
        assert!(
            row.contains('█') && row.trim_end().ends_with("│ 78"),
            "{row}"
        );
        assert!(line_with(&lines, "▲").contains('└'));
        assert!(line_with(&lines, "-5s").contains("+5s"));
    }
    assert_eq!(
        key(&mut state, KeyCode::Enter),
        Effect::Run(Job::User(format!("syscalls {range} | limit 500"))),
        "the slowest syscall's thread is not known here"
    );
    key(&mut state, KeyCode::Char('4'));
    assert_eq!(key(&mut state, KeyCode::Char('+')), Effect::Refresh);
    assert!(state.timeline.series.is_empty(), "±2s needs new counts");
    assert!(
        state
            .refresh_jobs()
            .iter()
            .any(|j| j.query().contains("every 66666us"))
    );
}

#[test]
fn t_on_a_listed_record_centres_the_timeline_on_it() {
    let mut state = live();
    let records = answer(
        &[("time", Kind::Time), ("tid", Kind::Int)],
        vec![vec![Cell::Int(9_000_000_000), Cell::Int(42)]],
    );
    state.apply(Job::User("syscalls | limit 1".into()), Ok(records));
    key(&mut state, KeyCode::Char('3'));
    assert_eq!(key(&mut state, KeyCode::Char('t')), Effect::Refresh);
    assert_eq!(state.view, View::Timeline);
    let anchor = state.timeline.anchor.as_ref().unwrap();
    assert_eq!((anchor.time, anchor.what.as_str()), (9_000_000_000, "42"));
    let counts = answer(
        &[("time", Kind::Time), ("count", Kind::Int)],
        vec![vec![Cell::Int(9_000_000_000), Cell::Int(1)]],
    );
    let query = state.timeline.query("syscalls").unwrap();
    state.apply(Job::Timeline("syscalls".into(), query), Ok(counts));
    assert_eq!(
        key(&mut state, KeyCode::Enter),
        Effect::Run(Job::User(
            "syscalls where tid = 42 [4000000000, 14000000000] | limit 500".into()
        )),
        "the records of the same thread (the fake schema has a tid)"
    );
}

#[test]
fn o_breaks_latency_down_by_the_next_source_the_capture_has() {
    let mut state = live();
    state.apply_health(health(&[("syscalls", 1, 0), ("sched", 1, 0)]), 0.0);
    key(&mut state, KeyCode::Char('2'));
    assert_eq!(key(&mut state, KeyCode::Char('o')), Effect::Refresh);
    assert_eq!(
        state.latency_query(),
        "sched | count, p50(off_cpu), p90(off_cpu), p99(off_cpu), p99.9(off_cpu), max(off_cpu) by state last 10s",
        "no block source here: it is skipped"
    );
    let states = answer(
        &[("state", Kind::Int), ("count", Kind::Int)],
        vec![vec![Cell::Text("S".into()), Cell::Int(25)]],
    );
    state.apply(Job::Latency(state.latency_query()), Ok(states));
    assert_eq!(
        key(&mut state, KeyCode::Enter),
        Effect::Run(Job::User(
            r#"sched where state = "S" | sort off_cpu desc | limit 100 last 10s"#.into()
        ))
    );
    key(&mut state, KeyCode::Char('2'));
    key(&mut state, KeyCode::Char('o'));
    assert!(
        state.latency_query().starts_with("syscalls |"),
        "back to syscalls"
    );
}

#[test]
fn p_on_a_listed_record_captures_pt_of_its_process() {
    let mut state = live();
    let records = answer(
        &[("time", Kind::Time), ("pid", Kind::Int)],
        vec![
            vec![Cell::Int(9_000_000_000), Cell::Int(4242)],
            vec![Cell::Int(9_000_000_001), Cell::Int(0)],
        ],
    );
    state.apply(Job::User("syscalls | limit 2".into()), Ok(records));
    key(&mut state, KeyCode::Char('3'));
    assert_eq!(key(&mut state, KeyCode::Char('p')), Effect::CapturePt(4242));
    key(&mut state, KeyCode::Down);
    assert_eq!(key(&mut state, KeyCode::Char('p')), Effect::None);
    assert_eq!(state.message, "this row names no process to capture");
}

#[test]
fn the_first_latency_table_asks_for_the_selected_rows_histogram() {
    // A recording asks nothing again until the user moves: the histogram
    // pane would stay empty if the table's arrival did not ask for it.
    let mut state = live();
    state.view = View::Latency;
    let effect = state.apply(Job::Latency(state.latency_query()), Ok(latency_answer()));
    let key = state.selected_key().unwrap();
    assert_eq!(effect, Effect::Run(Job::Hist(state.hist_query(&key))));
    state.apply(Job::Hist(state.hist_query(&key)), Ok(Answer::default()));
    let again = state.apply(Job::Latency(state.latency_query()), Ok(latency_answer()));
    assert_eq!(again, Effect::None);
}

#[test]
fn overview_shows_the_selected_source_s_latency_heatmap() {
    let mut state = live();
    state.apply_health(health(&[("syscalls", 0, 0), ("net", 0, 0)]), 0.0);
    let query = match state.refresh_jobs().first() {
        Some(Job::Heatmap(q)) => q.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(query, "syscalls | hist(dur) every 250ms last 10s");
    let d = Kind::Duration;
    let row = |t: i64, from: i64, n: i64| {
        vec![
            Cell::Int(t),
            Cell::Int(from),
            Cell::Int(from * 2),
            Cell::Int(n),
        ]
    };
    let heat = answer(
        &[
            ("time", Kind::Time),
            ("from", d.clone()),
            ("to", d),
            ("count", Kind::Int),
        ],
        vec![
            row(0, 256, 1000),
            row(250_000_000, 256, 900),
            row(250_000_000, 1 << 20, 3),
        ],
    );
    state.apply(Job::Heatmap(query), Ok(heat));
    for (width, height) in [(80, 24), (200, 60)] {
        let lines = screen(&state, width, height);
        assert!(
            line_with(&lines, "heatmap").contains("syscalls dur heatmap, 10s"),
            "{lines:#?}"
        );
        assert!(line_with(&lines, "  256ns ").contains("██"));
        assert!(line_with(&lines, " 1.05ms ").contains('░'));
        assert!(line_with(&lines, "now").trim_start().starts_with("now"));
        // Still the table and the agent's lines.
        assert!(line_with(&lines, "drain lag").contains("4.2 ms"));
    }
    // A source without a latency field has none, and leaves it empty.
    assert_eq!(key(&mut state, KeyCode::Down), Effect::Refresh);
    assert!(state.heatmap.is_none());
    assert!(
        !state
            .refresh_jobs()
            .iter()
            .any(|j| matches!(j, Job::Heatmap(_)))
    );
    assert!(!screen(&state, 80, 24).iter().any(|l| l.contains("heatmap")));
}
