//! The crates' layering, as each `lib.rs` states it: which crates each may
//! depend on, read from their `Cargo.toml`s. The test below keeps the
//! statements true: a crate that starts to reach the store, the command
//! line or eBPF where its `lib.rs` says it must not fails it, however
//! indirectly (through other weft crates) it reaches them.

#[cfg(test)]
mod tests {
    use std::{
        collections::{BTreeMap, BTreeSet},
        path::Path,
    };

    /// Folder -> the dependencies its `Cargo.toml` lists (not dev- or
    /// build-dependencies), by package name.
    fn dependencies(root: &Path, folder: &str) -> BTreeSet<String> {
        let text = std::fs::read_to_string(root.join(folder).join("Cargo.toml"))
            .expect("the crate's manifest reads");
        let mut out = BTreeSet::new();
        let mut inside = false;
        for line in text.lines() {
            if line.starts_with('[') {
                inside = line.trim() == "[dependencies]";
                continue;
            }
            let name: String = line
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                .collect();
            if inside && !name.is_empty() {
                out.insert(name);
            }
        }
        out
    }

    /// The weft crates' folders, by package name.
    const CRATES: [(&str, &str); 16] = [
        ("weft-abi", "abi"),
        ("weft-store", "store"),
        ("weft-ingest", "ingest"),
        ("weft-query", "query"),
        ("weft-oneliner", "oneliner"),
        ("weft-symbols", "symbols"),
        ("weft-pt", "pt"),
        ("weft-tui", "tui"),
        ("weft-client", "client"),
        ("weft-kernel", "kernel"),
        ("weft-capture", "capture"),
        ("weft-recording", "recording"),
        ("weft-pt-capture", "pt-capture"),
        ("weft-export", "export"),
        ("weft-peer", "peer"),
        ("weft", "agent"),
    ];

    /// Everything `package` depends on, through weft crates too.
    fn reach(graph: &BTreeMap<&str, BTreeSet<String>>, package: &str) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![package.to_owned()];
        while let Some(next) = stack.pop() {
            for dependency in graph.get(next.as_str()).into_iter().flatten() {
                if seen.insert(dependency.clone()) {
                    stack.push(dependency.clone());
                }
            }
        }
        seen
    }

    #[test]
    fn no_crate_reaches_what_its_lib_rs_forbids() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let graph: BTreeMap<&str, BTreeSet<String>> = CRATES
            .iter()
            .map(|(package, folder)| (*package, dependencies(&root, folder)))
            .collect();
        // The parser sees real dependencies, or this test proves nothing.
        assert!(graph["weft"].contains("clap"), "{graph:?}");
        assert!(graph["weft-kernel"].contains("aya"), "{graph:?}");
        let weft = |deps: &BTreeSet<String>| -> BTreeSet<String> {
            deps.iter()
                .filter(|d| d.starts_with("weft-"))
                .cloned()
                .collect()
        };
        // Which weft crates each of the lower ones may use at all.
        let only: [(&str, &[&str]); 10] = [
            ("weft-abi", &[]),
            ("weft-store", &[]),
            ("weft-symbols", &[]),
            ("weft-client", &[]),
            ("weft-ingest", &["weft-abi", "weft-store"]),
            ("weft-query", &["weft-store"]),
            ("weft-oneliner", &["weft-abi"]),
            ("weft-tui", &["weft-query", "weft-store"]),
            // Symbols for the calls; a pure decoder (its capture is
            // weft-pt-capture's).
            ("weft-pt", &["weft-symbols"]),
            // The channel moves signed bytes; its one weft type is the
            // fleet query's host.
            ("weft-peer", &["weft-query", "weft-store"]),
        ];
        for (package, allowed) in only {
            let used = weft(&reach(&graph, package));
            let allowed: BTreeSet<String> = allowed.iter().map(|a| (*a).to_owned()).collect();
            assert!(
                used.is_subset(&allowed),
                "{package} reaches {:?}",
                used.difference(&allowed).collect::<Vec<_>>()
            );
        }
        assert!(graph["weft-client"].is_empty(), "applications link it");
        // What the middle crates must not reach, through anything weft's.
        let never: [(&str, &[&str]); 6] = [
            // (aya, which weft-abi names as optional, is checked with
            // features resolved below.)
            ("weft-pt", &["weft-kernel", "weft-store", "clap"]),
            ("weft-kernel", &["weft-store", "weft-query", "clap"]),
            ("weft-recording", &["clap", "weft-pt"]),
            ("weft-pt-capture", &["clap", "weft-store"]),
            // Reading a capture never links the eBPF loader: `query`,
            // `info`, `export` and the UI's recording view run anywhere
            // (aya, which weft-abi names as optional, is checked with
            // features resolved below).
            ("weft-capture", &["weft-kernel", "clap", "weft-pt", "tokio"]),
            (
                "weft-export",
                &["clap", "weft-pt", "weft-kernel", "weft-recording"],
            ),
        ];
        for (package, forbidden) in never {
            let mut reached = reach(&graph, package);
            // External crates count where a weft crate names them directly.
            for dependency in reached.clone() {
                reached.extend(
                    graph
                        .get(dependency.as_str())
                        .into_iter()
                        .flatten()
                        .cloned(),
                );
            }
            for name in forbidden {
                assert!(!reached.contains(*name), "{package} reaches {name}");
            }
        }
    }

    #[test]
    fn library_crates_return_their_own_errors() {
        // A caller matches what went wrong (a capture that is damaged, a
        // query refused, the kernel refusing a program) instead of parsing
        // a message; only the binary turns errors into lines and exit
        // statuses.
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        // The parser sees the binary's, or this test proves nothing.
        assert!(dependencies(&root, "agent").contains("anyhow"));
        for (package, folder) in CRATES.iter().filter(|(package, _)| *package != "weft") {
            let uses = dependencies(&root, folder);
            assert!(!uses.contains("anyhow"), "{package} uses anyhow");
        }
    }

    /// The crates `package` links, with features resolved as a build of it
    /// alone resolves them (`cargo tree`).
    fn linked(package: &str) -> BTreeSet<String> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let out = std::process::Command::new(env!("CARGO"))
            .current_dir(root)
            .args([
                "tree", "--locked", "-e", "normal", "--prefix", "none", "-p", package,
            ])
            .output()
            .expect("cargo tree runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|line| line.split_whitespace().next())
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn reading_a_capture_links_neither_aya_nor_the_kernel_side() {
        // The parser sees the tree, or this test proves nothing.
        assert!(linked("weft-kernel").contains("aya"));
        for package in ["weft-capture", "weft-export"] {
            let linked = linked(package);
            assert!(linked.contains("weft-store"), "{linked:?}");
            for never in ["aya", "weft-kernel", "weft-recording", "tokio"] {
                assert!(!linked.contains(never), "{package} links {never}");
            }
        }
        // The PT decoder opens no event and maps no buffer: neither the
        // perf_event crate, nor weft-abi's mapping, nor aya is linked.
        let pt = linked("weft-pt");
        for never in ["aya", "perf-event2", "weft-abi"] {
            assert!(!pt.contains(never), "weft-pt links {never}: {pt:?}");
        }
    }
}
