//! Which of a crate's modules import which (`use crate::…`, `super::…` and
//! `crate::…` paths in code), and the circles among them. The test below
//! keeps every crate of the workspace free of circles: a module imports
//! only modules below it, so each can be read (and moved) on its own.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
};

/// Module path (`live::client`) -> the modules it names.
type Graph = BTreeMap<String, BTreeSet<String>>;

/// The import graph of the crate whose sources are under `src`.
pub fn graph(src: &Path) -> std::io::Result<Graph> {
    let mut texts = BTreeMap::new();
    read_modules(src, src, &mut texts)?;
    let modules: BTreeSet<String> = texts.keys().cloned().collect();
    let mut graph = Graph::new();
    for (module, text) in &texts {
        let named = named_paths(module, &strip_comments(text))
            .into_iter()
            .filter_map(|path| longest_module(&modules, &path))
            .filter(|named| named != module && !is_ancestor(named, module))
            .collect();
        graph.insert(module.clone(), named);
    }
    Ok(graph)
}

/// Every set of two or more modules that import each other, round.
pub fn circles(graph: &Graph) -> Vec<Vec<String>> {
    // Two modules are in one circle when each reaches the other.
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(m) = stack.pop() {
            for next in graph.get(&m).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|m| (m, reach(m))).collect();
    let mut placed = BTreeSet::new();
    let mut out = Vec::new();
    for (module, from) in &reached {
        if placed.contains(*module) || !from.contains(*module) {
            continue;
        }
        let circle: Vec<String> = from
            .iter()
            .filter(|other| reached[other].contains(*module))
            .cloned()
            .collect();
        placed.extend(circle.iter().cloned());
        out.push(circle);
    }
    out
}

fn read_modules(
    root: &Path,
    dir: &Path,
    out: &mut BTreeMap<String, String>,
) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            read_modules(root, &path, out)?;
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let relative = path.strip_prefix(root).unwrap_or(&path).with_extension("");
        let mut parts: Vec<String> = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        // `lib.rs`, `main.rs` and `mod.rs` are their folder's module.
        if parts.len() == 1 && matches!(parts[0].as_str(), "lib" | "main")
            || parts.last().is_some_and(|p| p == "mod")
        {
            parts.pop();
        }
        out.insert(parts.join("::"), std::fs::read_to_string(&path)?);
    }
    Ok(())
}

/// `text` without `//` comments (doc comments name modules in prose).
fn strip_comments(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            // A `//` inside a string literal is rare enough in code paths.
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths (from the crate's root) that `module`'s text names, each
/// expanded from its use tree: `crate::{a, b::{c, d}}` names `a`, `b::c`
/// and `b::d`.
fn named_paths(module: &str, text: &str) -> Vec<Vec<String>> {
    let tokens = tokens(text);
    let mut out = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        let base: Vec<String> = match token.as_str() {
            "crate" => Vec::new(),
            "super" => {
                // Only a path's first `super`: `super::super::x` counts once.
                if i > 0 && tokens[i - 1] == "::" {
                    continue;
                }
                let mut parent: Vec<String> = module
                    .split("::")
                    .filter(|p| !p.is_empty())
                    .map(str::to_owned)
                    .collect();
                let mut j = i;
                while tokens.get(j).is_some_and(|t| t == "super") {
                    parent.pop();
                    j += 2;
                }
                let mut at = j - 1;
                tree(&tokens, &mut at, parent, &mut out);
                continue;
            }
            _ => continue,
        };
        let mut at = i + 1;
        tree(&tokens, &mut at, base, &mut out);
    }
    out
}

/// Reads a use tree after a `::` at `tokens[*at]`, adding each full path.
fn tree(tokens: &[String], at: &mut usize, mut path: Vec<String>, out: &mut Vec<Vec<String>>) {
    while tokens.get(*at).is_some_and(|t| t == "::") {
        *at += 1;
        match tokens.get(*at).map(String::as_str) {
            Some("{") => {
                *at += 1;
                loop {
                    match tokens.get(*at).map(String::as_str) {
                        None | Some("}") => break,
                        Some(",") => *at += 1,
                        Some("self") => {
                            out.push(path.clone());
                            *at += 1;
                        }
                        Some(word) if is_ident(word) => {
                            let mut inner = path.clone();
                            inner.push(word.to_owned());
                            *at += 1;
                            tree(tokens, at, inner, out);
                        }
                        Some(_) => *at += 1,
                    }
                }
                *at += 1;
                return;
            }
            Some(word) if is_ident(word) && word != "super" => {
                path.push(word.to_owned());
                *at += 1;
            }
            _ => break,
        }
    }
    out.push(path);
}

fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c.is_alphanumeric() || c == '_' {
            let mut end = i + c.len_utf8();
            while let Some(&(j, d)) = chars.peek() {
                if !(d.is_alphanumeric() || d == '_') {
                    break;
                }
                end = j + d.len_utf8();
                chars.next();
            }
            out.push(text[i..end].to_owned());
        } else if c == ':' && chars.peek().is_some_and(|&(_, d)| d == ':') {
            chars.next();
            out.push("::".to_owned());
        } else if !c.is_whitespace() {
            out.push(c.to_string());
        }
    }
    out
}

fn is_ident(word: &str) -> bool {
    word.starts_with(|c: char| c.is_alphabetic() || c == '_')
}

/// The deepest module that `path` lies in, if any.
fn longest_module(modules: &BTreeSet<String>, path: &[String]) -> Option<String> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].join("::"))
        .find(|m| modules.contains(m))
}

/// Whether `a` contains `b` (`live` contains `live::client`): a module's
/// declaration of its children is not an import.
fn is_ancestor(a: &str, b: &str) -> bool {
    a.is_empty() || b.starts_with(&format!("{a}::"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn use_trees_expand_to_their_paths() {
        let text =
            "use crate::{a, b::{c, self}, d::e::F};\nfn f() { super::g::h(); crate::i::j(); }";
        let mut got = named_paths("x::y", text);
        got.sort();
        let want: Vec<Vec<String>> = [
            vec!["a"],
            vec!["b"],
            vec!["b", "c"],
            vec!["d", "e", "F"],
            vec!["i", "j"],
            vec!["x", "g", "h"],
        ]
        .into_iter()
        .map(|p| p.into_iter().map(str::to_owned).collect())
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn circles_are_found() {
        let graph: Graph = [
            ("a", &["b"][..]),
            ("b", &["c"]),
            ("c", &["a"]),
            ("d", &["a"]),
        ]
        .into_iter()
        .map(|(m, to)| (m.to_owned(), to.iter().map(|t| (*t).to_owned()).collect()))
        .collect();
        assert_eq!(circles(&graph), vec![vec!["a", "b", "c"]]);
    }

    /// Every crate of the workspace: no module imports one that imports it
    /// back, however far round.
    #[test]
    fn no_crate_has_an_import_circle() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for krate in [
            "abi",
            "agent",
            "client",
            "export",
            "ingest",
            "kernel",
            "oneliner",
            "pt",
            "pt-capture",
            "query",
            "recording",
            "store",
            "symbols",
            "tui",
            "xtask",
        ] {
            let graph = graph(&root.join(krate).join("src")).expect("the crate's sources read");
            if krate == "agent" {
                // The parser sees real imports, or this test proves nothing.
                assert!(graph["record"].contains("pt_demand"), "{graph:?}");
                assert!(graph["tui"].contains("record"), "{graph:?}");
            }
            assert!(
                graph.len() > 1 || krate == "client",
                "{krate}: no modules found"
            );
            let circles = circles(&graph);
            assert!(
                circles.is_empty(),
                "{krate}: modules importing each other round: {circles:?}"
            );
        }
    }
}
