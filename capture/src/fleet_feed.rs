//! Several hosts' captures in one terminal UI (`weft tui --fleet A,B,...`),
//! typically the windows `weft extract --fleet` kept of one firing: the
//! first capture (the firing's origin) keeps its sources' names, every
//! other host's sources are named `HOST:source` (HOST its directory's
//! name), and all of them sit on the first capture's clock, placed by each
//! capture's wall-clock reference and, where `extract --fleet` noted it,
//! by how far each host's wall clock was from the origin's (measured
//! between the hosts as the firing traveled). The timeline then shows what
//! every host did around the first host's slow call on one axis.

use std::{fmt::Write as _, path::Path};

use weft_query::{
    Answer, Cell, Kind,
    feed::Feed,
    health::{Health, SourceHealth},
};

use crate::{
    error::{Result, refuse},
    feed::CaptureFeed,
};

/// A capture's wall clock minus the firing origin's, and the bound on that
/// estimate's error, ns (`weft.json`'s `extracted` entry).
type ToOrigin = (i64, u64);

/// One host of the fleet.
struct Host {
    /// What its sources are prefixed with (`None` for the first).
    name: Option<String>,
    feed: CaptureFeed,
    /// Its clock minus the first capture's, ns: a time `t` on the first
    /// capture's clock is `t + delta` on its own.
    delta: i64,
}

/// Captures of several hosts as one feed.
pub struct FleetFeed {
    hosts: Vec<Host>,
    /// The bound on the error of the hosts' placement on the first
    /// capture's clock, when every host's clock against the origin was
    /// measured.
    clock_error: Option<u64>,
}

impl FleetFeed {
    /// Opens each capture of `dirs` (the first one's clock is the UI's);
    /// every one needs a wall-clock reference to line up with the others.
    pub fn open(dirs: &[&Path], skip_damaged: bool) -> Result<Self> {
        let Some(first) = dirs.first() else {
            refuse!("--fleet names no capture directory");
        };
        let feed = |dir: &Path| -> Result<(CaptureFeed, i64, Option<ToOrigin>)> {
            let feed = CaptureFeed::open(dir, skip_damaged)?;
            let Some(wall) = feed.wall_offset() else {
                refuse!(
                    "{} has no wall-clock reference to line it up with the other hosts",
                    dir.display()
                );
            };
            let metadata = feed.metadata()?;
            let clock =
                (metadata.extracted.as_ref()).and_then(|e| e.clock_offset_ns.zip(e.clock_error_ns));
            Ok((feed, wall, clock))
        };
        let (first_feed, first_wall, first_clock) = feed(first)?;
        let mut hosts = vec![Host {
            name: None,
            feed: first_feed,
            delta: 0,
        }];
        let mut clock_error = first_clock.map(|_| 0);
        for dir in &dirs[1..] {
            let (feed, wall, clock) = feed(dir)?;
            let name = host_name(dir);
            if hosts.iter().any(|h| h.name.as_deref() == Some(&name)) {
                refuse!("two captures of --fleet are named {name}: rename one directory");
            }
            // Its wall clock minus the first's, as measured against the
            // origin; else the wall clocks are taken to agree.
            let (ahead, error) = match (clock, first_clock) {
                (Some((mine, e)), Some((first, f))) => (mine - first, Some(e + f)),
                _ => (0, None),
            };
            clock_error = clock_error.zip(error).map(|(a, b)| a.max(b));
            hosts.push(Host {
                name: Some(name),
                feed,
                delta: first_wall - wall + ahead,
            });
        }
        Ok(Self { hosts, clock_error })
    }

    /// The host a query is for, and the query as that host reads it: a
    /// `HOST:` prefix on its source picks the host, and windows given as
    /// times move onto its clock.
    fn route(&self, query: &str) -> (&Host, String) {
        let trimmed = query.trim_start();
        let word = trimmed.split_whitespace().next().unwrap_or_default();
        let host = word.split_once(':').and_then(|(prefix, _)| {
            self.hosts
                .iter()
                .find(|h| h.name.as_deref() == Some(prefix))
        });
        match host {
            Some(host) => {
                let prefix = host.name.as_deref().map_or(0, |n| n.len() + 1);
                (host, shift_windows(&trimmed[prefix..], host.delta))
            }
            None => (&self.hosts[0], query.to_owned()),
        }
    }
}

/// A capture directory's name, as its sources' prefix.
fn host_name(dir: &Path) -> String {
    dir.file_name().map_or_else(
        || dir.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// `text` with each window of two times (`[FROM, TO]`, outside strings)
/// moved by `delta` ns.
fn shift_windows(text: &str, delta: i64) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut quoted = false;
    while let Some(c) = rest.chars().next() {
        if c == '"' {
            quoted = !quoted;
        } else if c == '\\' && quoted {
            // An escaped character inside a string stays as it is.
            let escaped: String = rest.chars().take(2).collect();
            out.push_str(&escaped);
            rest = &rest[escaped.len()..];
            continue;
        } else if c == '['
            && !quoted
            && let Some((from, to, len)) = two_times(rest)
        {
            let _ = write!(out, "[{}, {}]", from + delta, to + delta);
            rest = &rest[len..];
            continue;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// `[FROM, TO]` at the start of `text`, both integers: their values and
/// the bytes they take.
fn two_times(text: &str) -> Option<(i64, i64, usize)> {
    let end = text.find(']')?;
    let (from, to) = text[1..end].split_once(',')?;
    Some((from.trim().parse().ok()?, to.trim().parse().ok()?, end + 1))
}

/// `answer`'s times moved from a host's clock onto the first capture's.
fn onto_first_clock(mut answer: Answer, delta: i64) -> Answer {
    let times: Vec<usize> = (answer.columns.iter().enumerate())
        .filter(|(_, h)| matches!(h.kind, Kind::Time))
        .map(|(i, _)| i)
        .collect();
    for row in &mut answer.rows {
        for &i in &times {
            if let Cell::Int(t) = &mut row[i] {
                *t -= delta;
            }
        }
    }
    answer
}

impl Feed for FleetFeed {
    fn ask(&self, query: &str) -> Result<Answer, String> {
        let (host, query) = self.route(query);
        let answer = host.feed.ask(&query)?;
        Ok(onto_first_clock(answer, host.delta))
    }

    fn health(&self) -> Health {
        let mut health = self.hosts[0].feed.health();
        for host in &self.hosts[1..] {
            let name = host.name.as_deref().unwrap_or_default();
            let theirs = host.feed.health();
            health
                .sources
                .extend(theirs.sources.into_iter().map(|s| SourceHealth {
                    name: format!("{name}:{}", s.name),
                    ..s
                }));
            health.disk_bytes += theirs.disk_bytes;
            health.pins_released += theirs.pins_released;
        }
        health
    }

    fn schema(&self) -> Vec<(String, Vec<String>)> {
        self.hosts
            .iter()
            .flat_map(|host| {
                host.feed.schema().into_iter().map(|(source, fields)| {
                    let source = match &host.name {
                        Some(name) => format!("{name}:{source}"),
                        None => source,
                    };
                    (source, fields)
                })
            })
            .collect()
    }

    fn range(&self) -> Option<(u64, u64)> {
        self.hosts
            .iter()
            .filter_map(|host| {
                let (start, end) = host.feed.range()?;
                let first = |t: u64| u64::try_from(i64::try_from(t).ok()? - host.delta).ok();
                Some((first(start)?, first(end)?))
            })
            .reduce(|(a, b), (c, d)| (a.min(c), b.max(d)))
    }

    fn title(&self) -> String {
        let others: Vec<&str> = self.hosts[1..]
            .iter()
            .filter_map(|h| h.name.as_deref())
            .collect();
        let first = self.hosts[0].feed.dir();
        let clocks = match self.clock_error {
            Some(ns) => format!("clocks within ±{:.1} us", ns as f64 / 1e3),
            None => "clocks as their wall clocks".into(),
        };
        format!(
            "fleet {} with {} ({clocks})",
            host_name(first),
            others.join(", ")
        )
    }

    fn wall_offset(&self) -> Option<i64> {
        self.hosts[0].feed.wall_offset()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_move_onto_a_host_s_clock_and_strings_stay() {
        assert_eq!(
            shift_windows(r#"syscalls where comm = "[1, 2]" [100, 200] | limit 5"#, 50),
            r#"syscalls where comm = "[1, 2]" [150, 250] | limit 5"#
        );
        assert_eq!(
            shift_windows("syscalls | count every 1000us [5, 7]", -5),
            "syscalls | count every 1000us [0, 2]"
        );
        // A wall-clock window of dates is not moved: every capture reads it
        // on its own wall clock.
        let dates = r#"syscalls ["2026-11-22T05:31:00Z", "2026-11-22T05:32:00Z"] | count"#;
        assert_eq!(shift_windows(dates, 9), dates);
        assert_eq!(
            shift_windows(r#"x where comm = "a\"[1, 2]" [1, 2]"#, 1),
            r#"x where comm = "a\"[1, 2]" [2, 3]"#
        );
    }
}
