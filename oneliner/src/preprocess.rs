//! The lines bpftrace's scripts give its C preprocessor, before parsing.
//!
//! bpftrace runs a script's `#` lines through a preprocessor to reach
//! kernel headers. weft takes types from the kernel's BTF, as bpftrace
//! does when the kernel has it: so `#include` lines are not needed, code
//! under `#ifndef BPFTRACE_HAVE_BTF` is left out (its `#else` kept), and a
//! `#!` line starts a script that runs itself. Each line left out becomes
//! blanks of the same length, so errors still point into the text given.

use crate::error::{Error, Result, Span};

/// `text` with its preprocessor lines, and the code they leave out, blank.
pub fn preprocess(text: &str) -> Result<String> {
    let mut out = String::with_capacity(text.len());
    // Per open `#if`: whether its code is kept.
    let mut open: Vec<bool> = Vec::new();
    let mut at = 0;
    // Whether the line starts inside a `/* */` comment (no directive there).
    let mut in_comment = false;
    for line in text.split_inclusive('\n') {
        let directive = line.trim_start();
        let kept = open.iter().all(|k| *k);
        let starts_in_comment = in_comment;
        in_comment = ends_in_comment(line, in_comment);
        let blank = if let Some(rest) = directive.strip_prefix('#').filter(|_| !starts_in_comment) {
            let word = rest.split_whitespace().next().unwrap_or_default();
            let arg = rest.split_whitespace().nth(1).unwrap_or_default();
            let here = || {
                Span::new(
                    at + line.len() - directive.len(),
                    directive.trim_end().len(),
                )
            };
            match word {
                _ if rest.starts_with('!') => {}
                "include" => {}
                "ifndef" | "ifdef" if arg == "BPFTRACE_HAVE_BTF" => open.push(word == "ifdef"),
                "else" => match open.last_mut() {
                    Some(kept) => *kept = !*kept,
                    None => return Err(Error::new(here(), "`#else` without `#if`")),
                },
                "endif" => {
                    if open.pop().is_none() {
                        return Err(Error::new(here(), "`#endif` without `#if`"));
                    }
                }
                _ if !kept => {}
                _ => {
                    return Err(Error::new(
                        here(),
                        format!(
                            "`#{word}` is not supported: weft takes types from the kernel's BTF \
                             (only #include and #ifndef/#ifdef BPFTRACE_HAVE_BTF are read)"
                        ),
                    ));
                }
            }
            true
        } else {
            !kept
        };
        if blank {
            for c in line.chars() {
                match c {
                    '\n' => out.push('\n'),
                    c => out.extend(std::iter::repeat_n(' ', c.len_utf8())),
                }
            }
        } else {
            out.push_str(line);
        }
        at += line.len();
    }
    if !open.is_empty() {
        return Err(Error::new(
            Span::new(text.len(), 0),
            "`#if` without `#endif`",
        ));
    }
    Ok(out)
}

/// Whether a `/* */` comment is open at the end of `line`, given whether
/// one was at its start (strings and `//` comments hide delimiters).
fn ends_in_comment(line: &str, mut in_comment: bool) -> bool {
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (in_comment, c, chars.peek()) {
            (true, '*', Some('/')) => {
                chars.next();
                in_comment = false;
            }
            (false, '/', Some('*')) => {
                chars.next();
                in_comment = true;
            }
            (false, '/', Some('/')) => break,
            (false, '"', _) => {
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    in_comment
}

#[cfg(test)]
mod tests {
    use super::preprocess;

    #[test]
    fn headers_and_the_no_btf_branch_are_left_out_in_place() {
        let script = "#!/usr/bin/env bpftrace\n#ifndef BPFTRACE_HAVE_BTF\n#include <linux/sched.h>\nstruct x { int a; };\n#else\n#include <sys/socket.h>\n#endif\nBEGIN { }\n";
        let out = preprocess(script).unwrap();
        assert_eq!(out.len(), script.len());
        assert_eq!(out.trim(), "BEGIN { }");
        assert_eq!(out.find("BEGIN"), script.find("BEGIN"));
    }

    #[test]
    fn a_hash_inside_a_comment_is_not_a_directive() {
        let script = "/*\n # need changes\n */\nBEGIN { printf(\"/*\"); }\n#include <x.h>\n";
        let out = preprocess(script).unwrap();
        assert!(out.contains("# need changes"), "{out}");
        assert!(!out.contains("#include"), "{out}");
    }

    #[test]
    fn other_directives_and_unbalanced_ones_are_errors() {
        assert!(
            preprocess("#define X 1\nBEGIN {}")
                .unwrap_err()
                .to_string()
                .contains("#define")
        );
        assert!(preprocess("#ifndef BPFTRACE_HAVE_BTF\nBEGIN {}").is_err());
        assert!(preprocess("#endif\n").is_err());
    }
}
