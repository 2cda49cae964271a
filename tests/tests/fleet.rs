//! Many hosts on one machine: network namespaces joined by a bridge, each
//! host with its own `weft record` filtered to its own processes and its
//! own peer port. A slow request at the end of a client -> proxy -> server
//! chain fires a trigger on the server's host; the proxy's and the
//! client's hosts keep the same window, found from the kernel's own
//! connections, and a fourth host with unrelated traffic keeps nothing.
//! A fleet query over the three recorders gives the exact percentile of
//! all their records, sending far fewer bytes than the records.

use std::{
    io::Write as _,
    os::unix::fs::PermissionsExt as _,
    process::{Child, Command, Stdio},
};

use weft_tests::{Running, can_trace, capture_dir, kernel_at_least, run_weft, weft_bin};

const CHAIN: &str = env!("CARGO_BIN_EXE_weft-chain");

/// Hosts as network namespaces on a bridge: host `i` (from 1) is
/// `10.78.0.i`, this namespace `10.78.0.254`. Removed on drop.
struct Hosts {
    namespaces: Vec<String>,
}

const BRIDGE: &str = "weftbr0";

impl Hosts {
    fn new(n: usize) -> Result<Self, String> {
        let mut hosts = Self {
            namespaces: Vec::new(),
        };
        ip(&["link", "add", BRIDGE, "type", "bridge"])?;
        // The asker of fleet queries (this test) is 10.78.0.254.
        ip(&["addr", "add", "10.78.0.254/24", "dev", BRIDGE])?;
        ip(&["link", "set", BRIDGE, "up"])?;
        for i in 1..=n {
            let ns = format!("weft-host{i}-{}", std::process::id());
            ip(&["netns", "add", &ns])?;
            hosts.namespaces.push(ns.clone());
            let (outside, inside) = (format!("wfh{i}a"), format!("wfh{i}b"));
            let addr = format!("{}/24", Self::addr(i));
            for args in [
                vec![
                    "link", "add", &outside, "type", "veth", "peer", "name", &inside,
                ],
                vec!["link", "set", &outside, "master", BRIDGE],
                vec!["link", "set", &outside, "up"],
                vec!["link", "set", &inside, "netns", &ns],
                vec!["-n", &ns, "addr", "add", &addr, "dev", &inside],
                vec!["-n", &ns, "link", "set", &inside, "up"],
                vec!["-n", &ns, "link", "set", "lo", "up"],
            ] {
                ip(&args)?;
            }
        }
        Ok(hosts)
    }

    fn addr(i: usize) -> String {
        format!("10.78.0.{i}")
    }

    /// `ip netns exec` into host `i`.
    fn exec(&self, i: usize) -> [&str; 4] {
        ["ip", "netns", "exec", &self.namespaces[i - 1]]
    }

    /// Runs `weft-chain ARGS` on host `i`, stdin piped.
    fn chain(&self, i: usize, args: &[&str]) -> Child {
        Command::new("ip")
            .args(&self.exec(i)[1..])
            .arg(CHAIN)
            .args(args)
            .stdin(Stdio::piped())
            .spawn()
            .expect("weft-chain starts")
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for ns in &self.namespaces {
            let _ = ip(&["netns", "delete", ns]);
        }
        let _ = ip(&["link", "delete", BRIDGE]);
    }
}

fn ip(args: &[&str]) -> Result<(), String> {
    let output = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// Kills a chain process when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_slow_request_keeps_its_window_on_every_host_it_touched() {
    let test = "a_slow_request_keeps_its_window_on_every_host_it_touched";
    if !can_trace(test) {
        return;
    }
    if !kernel_at_least(6, 3) {
        eprintln!("skipping {test}: conns needs sock:sock_send_length (Linux 6.3)");
        return;
    }
    let hosts = Hosts::new(4).expect("network namespaces on a bridge (root, iproute2)");
    let keys = capture_dir("fleet-chain-keys");
    std::fs::create_dir_all(&keys).unwrap();
    let secret = keys.join("key");
    std::fs::write(&secret, "the fleet chain's shared secret\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let secret = secret.to_str().unwrap();

    // Host 1 serves the chain (its 10th request sleeps 300 ms) and, in
    // another process, the fourth host; host 2 proxies; host 3 asks.
    let (h1, h2) = (Hosts::addr(1), Hosts::addr(2));
    let server = Killed(hosts.chain(1, &["server", &format!("{h1}:7000"), "10", "300"]));
    let other = Killed(hosts.chain(1, &["server", &format!("{h1}:7001"), "0", "0"]));
    let proxy = Killed(hosts.chain(2, &["proxy", &format!("{h2}:7000"), &format!("{h1}:7000")]));
    let mut client = hosts.chain(3, &["client", &format!("{h2}:7000"), "20", "20"]);
    let mut unrelated = hosts.chain(4, &["client", &format!("{h1}:7001"), "20", "20"]);
    let pids = [
        format!("{},{}", server.0.id(), other.0.id()),
        proxy.0.id().to_string(),
        client.id().to_string(),
        unrelated.id().to_string(),
    ];
    let dirs: Vec<_> = (1..=4)
        .map(|i| capture_dir(&format!("fleet-chain-{i}")))
        .collect();
    let recorders: Vec<Running> = (1..=4)
        .map(|i| {
            let listen = format!("{}:9465", Hosts::addr(i));
            let mut args = vec![
                "record",
                "-o",
                dirs[i - 1].to_str().unwrap(),
                "--sources",
                "syscalls,conns,net",
                "--pid",
                &pids[i - 1],
                "--keep=-2s..+1s",
                "--peer-listen",
                &listen,
                "--peer-secret",
                secret,
            ];
            if i == 1 {
                args.extend([
                    "--trigger",
                    r#"syscalls where name = "nanosleep" and dur > 100ms"#,
                ]);
            }
            Running::start_under(&hosts.exec(i), &args, "weft: recording")
        })
        .collect();
    for started in [&mut client, &mut unrelated] {
        started.stdin.take().unwrap().write_all(b"g").unwrap();
    }
    assert!(client.wait().unwrap().success());
    assert!(unrelated.wait().unwrap().success());
    // The proxy's and the client's recorders keep the firing.
    let kept = |r: &Running| r.wait_for_stderr("weft: keeping firing");
    assert!(kept(&recorders[1]).contains(&format!("asked by {h1}:9465, hop 1")));
    assert!(kept(&recorders[2]).contains(&format!("asked by {h2}:9465, hop 2")));

    let peers: Vec<String> = (1..=3)
        .map(|i| format!("{}:9465", Hosts::addr(i)))
        .collect();
    let fleet_answer = fleet_sendto(&peers.join(","), secret);
    let finished: Vec<_> = recorders.into_iter().map(Running::stop).collect();
    for done in &finished {
        assert!(done.status.success(), "{}", done.stderr);
    }
    assert!(
        !finished[3].stderr.contains("keeping firing"),
        "{}",
        finished[3].stderr
    );
    let firing = kept_along_the_chain(&dirs);
    exact_over_exports(&dirs[..3], &fleet_answer);
    extracted_across_the_fleet(&dirs, &firing);
    drop((server, other, proxy));
    for dir in dirs.iter().chain([&keys]) {
        std::fs::remove_dir_all(dir).unwrap();
    }
}

/// Each host's `weft.json` says what peers asked of it: the proxy (hop 1)
/// and the client (hop 2) kept the one firing, the server and the fourth
/// host kept none; prints how long after the firing the last peer kept it.
fn kept_along_the_chain(dirs: &[weft_tests::CaptureDir]) -> String {
    let peers_of = |i: usize| metadata(&dirs[i - 1])["sessions"][0]["triggers"]["peers"].clone();
    let received = |i: usize| {
        peers_of(i)["received"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(received(1).len(), 0);
    assert_eq!(received(4).len(), 0, "the unrelated host keeps nothing");
    let (at_proxy, at_client) = (&received(2)[0], &received(3)[0]);
    assert_eq!(
        (at_proxy["hop"].as_u64(), at_proxy["kept"].as_bool()),
        (Some(1), Some(true)),
        "{at_proxy}"
    );
    assert_eq!(
        (at_client["hop"].as_u64(), at_client["kept"].as_bool()),
        (Some(2), Some(true)),
        "{at_client}"
    );
    assert_eq!(at_proxy["id"], at_client["id"], "one firing");
    // Each placed the window on its own clock by the TCP segments both ends
    // saw, at the first firing: the hosts share one clock, so the bound
    // holds 0, and it is the wire's time, far below the 50 ms a host
    // widens by when nothing was measured.
    for at in [at_proxy, at_client] {
        assert_eq!(at["clock_from"], "segments", "{at}");
        let (offset, error) = (
            at["clock_offset_ns"].as_i64().unwrap(),
            at["clock_error_ns"].as_i64().unwrap(),
        );
        assert!(offset.abs() <= error && error < 5_000_000, "{at}");
        eprintln!("clock offset {offset} ns, within {error} ns, from the segments");
    }
    // The last peer kept it soon after the symptom (Hindsight: 100 ms).
    let took = at_client["answered_wall_ns"].as_i64().unwrap()
        - at_client["fired_wall_ns"].as_i64().unwrap();
    eprintln!(
        "the last peer kept the window {:.1} ms after the firing",
        took as f64 / 1e6
    );
    assert!(took < 2_000_000_000, "{took} ns");
    // The origin lists the firing it sent, with its window.
    let fired = peers_of(1)["fired"][0].clone();
    assert_eq!(fired["id"], at_client["id"], "{fired}");
    fired["id"].as_str().unwrap().to_owned()
}

/// `weft extract --fleet` copies the window each host kept for `firing`
/// into a capture of its own, named as the host's: the server's holds the
/// slow `nanosleep`, the fourth host has none, and the three open as one
/// fleet.
fn extracted_across_the_fleet(dirs: &[weft_tests::CaptureDir], firing: &str) {
    let out = capture_dir("fleet-chain-extracted");
    let all: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    let (status, _, stderr) = run_weft(&[
        "extract",
        "--fleet",
        &all.join(","),
        "--firing",
        firing,
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("kept no firing {firing}")),
        "{stderr}"
    );
    let copy = |i: usize| out.join(dirs[i - 1].file_name().unwrap());
    assert!(!copy(4).exists(), "the fourth host kept nothing");
    // Each copy says how far its clock is from the origin's, composed hop
    // by hop from the segments: 0 at the server, and the bound, which
    // grows along the chain, holds the hosts' one shared clock.
    let clock = |i: usize| {
        let extracted = &metadata(&copy(i))["extracted"];
        (
            extracted["clock_offset_ns"].as_i64().unwrap(),
            extracted["clock_error_ns"].as_i64().unwrap(),
        )
    };
    assert_eq!(clock(1), (0, 0));
    let (proxy, client) = (clock(2), clock(3));
    for (offset, error) in [proxy, client] {
        assert!(
            offset.abs() <= error && error < 5_000_000,
            "{proxy:?} {client:?}"
        );
    }
    assert!(client.1 >= proxy.1, "{proxy:?} {client:?}");
    let slow = weft_tests::query_rows(
        &copy(1),
        r#"syscalls where name = "nanosleep" and dur > 100ms | count"#,
    );
    assert_eq!(slow[0]["count"], 1, "{slow:?}");
    let copies: Vec<String> = (1..=3).map(|i| copy(i).display().to_string()).collect();
    let (status, stdout, stderr) = run_weft(&[
        "query",
        "--fleet",
        &copies.join(","),
        "--json",
        r#"syscalls where name = "sendto" | count"#,
    ]);
    assert!(status.success(), "{stderr}");
    let count: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert!(count["count"].as_u64().unwrap() > 0, "{count}");
    // Across the windows: each host's calls within 50 ms (wall-clock) of
    // the slow call at the server, by host. The server's own, the proxy's
    // and the client's that carried the reply back are there.
    let (status, stdout, stderr) = run_weft(&[
        "query",
        "--fleet",
        &copies.join(","),
        "--json",
        r#"syscalls around (syscalls where name = "nanosleep" and dur > 100ms) within 50ms | count by host | sort host"#,
    ]);
    assert!(status.success(), "{stderr}");
    let rows: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let hosts: Vec<&str> = rows.iter().map(|r| r["host"].as_str().unwrap()).collect();
    assert_eq!(hosts, copies, "{stdout}");
    assert!(
        rows.iter().all(|r| r["count"].as_u64() > Some(0)),
        "{stdout}"
    );
    fleet_timeline(&copies);
    std::fs::remove_dir_all(&out).unwrap();
}

/// `weft tui --fleet` over the windows: on the timeline around the
/// server's slow call (its slowest syscall), the proxy's and the client's
/// syscalls count on the same axis, as `HOST:syscalls`.
fn fleet_timeline(copies: &[String]) {
    use crate::tui::{Tmux, row};
    if !Tmux::available("a_slow_request_keeps_its_window_on_every_host_it_touched") {
        return;
    }
    let command = format!("{} tui --fleet {}", weft_bin().display(), copies.join(","));
    let tmux = Tmux::start_sized("fleet", &command, (160, 30));
    tmux.wait_for("the overview", |s| row(s, "syscalls").is_some());
    tmux.keys(&["4"]);
    let others: Vec<String> = copies[1..]
        .iter()
        .map(|c| {
            let name = std::path::Path::new(c).file_name().unwrap();
            format!("{}:syscalls", name.to_string_lossy())
        })
        .collect();
    let screen = tmux.wait_for("every host on the timeline", |s| {
        s.contains("nanosleep")
            && s.contains("clocks within ±")
            && others.iter().all(|name| {
                s.lines().any(|l| {
                    l.starts_with(name.as_str())
                        && l.contains('│')
                        && l.split_whitespace()
                            .last()
                            .and_then(|n| n.parse::<u64>().ok())
                            > Some(0)
                })
            })
    });
    eprintln!("{screen}");
    tmux.keys(&["q"]);
    let screen = tmux.wait_for("weft to exit", |s| s.contains("weft-exit="));
    assert!(screen.contains("weft-exit=0"), "{screen}");
}

/// The fleet's p99.99 and count of `sendto` durations, once the
/// recorders have published every record (each publishes once a second:
/// two answers a publish apart agree); prints the bytes its hosts sent
/// against their records'.
fn fleet_sendto(peers: &str, secret: &str) -> serde_json::Value {
    let query = r#"syscalls where name = "sendto" | p99.99(dur), p50(dur), count"#;
    let ask = |format: &str| {
        let (status, stdout, stderr) = run_weft(&[
            "query",
            "--fleet",
            peers,
            "--peer-secret",
            secret,
            format,
            query,
        ]);
        assert!(status.success(), "{stderr}");
        stdout
    };
    let mut answer = ask("--json");
    for _ in 0..10 {
        std::thread::sleep(std::time::Duration::from_millis(1100));
        let again = ask("--json");
        if again == answer {
            break;
        }
        answer = again;
    }
    let explain = ask("--explain");
    let fleet = explain.lines().find(|l| l.starts_with("fleet:")).unwrap();
    eprintln!("{fleet}");
    serde_json::from_str(&answer).unwrap()
}

/// The fleet's answer equals the nearest-rank quantiles over every host's
/// exported `sendto` durations.
fn exact_over_exports(dirs: &[weft_tests::CaptureDir], fleet: &serde_json::Value) {
    let dirs: Vec<&std::path::Path> = dirs.iter().map(|d| &**d).collect();
    let durations = weft_tests::exported_durations(&dirs, r#"name = "sendto""#);
    let n = durations.len();
    assert_eq!(fleet["count"].as_u64(), Some(n as u64), "{fleet}");
    // Nearest rank: ceil(q * n), in integers.
    let rank = |per_10000: usize| (per_10000 * n).div_ceil(10_000).clamp(1, n);
    assert_eq!(
        fleet["p99.99(dur)"].as_i64(),
        Some(durations[rank(9_999) - 1]),
        "{fleet}"
    );
    assert_eq!(
        fleet["p50(dur)"].as_i64(),
        Some(durations[rank(5_000) - 1]),
        "{fleet}"
    );
}

fn metadata(dir: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("weft.json")).unwrap()).unwrap()
}
