//! Stacks as the kernel recorded them, their frames named, printed in one of
//! bpftrace's stack modes (`kstack(perf)`, `ustack(raw, 5)`).

use std::fmt::Write as _;

/// How a stack prints: bpftrace's modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StackMode {
    /// A name a line, indented by 8 spaces (the default).
    Bpftrace,
    /// perf's layout: a tab, the address in hex, the name, and for a user
    /// frame the file holding it.
    Perf,
    /// The addresses alone, in hex (bpftrace 0.18 and later).
    Raw,
}

impl StackMode {
    /// The mode a word names.
    pub fn named(word: &str) -> Option<Self> {
        match word {
            "bpftrace" => Some(Self::Bpftrace),
            "perf" => Some(Self::Perf),
            "raw" => Some(Self::Raw),
            _ => None,
        }
    }
}

/// A frame: its address and what names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub ip: u64,
    /// `function+offset`, or the address (`0x…`) when no symbol holds it.
    pub name: String,
    /// For a user frame whose function was found, the file holding it.
    pub file: Option<String>,
}

/// A recorded stack, innermost frame first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stack {
    /// A process's stack rather than the kernel's: perf's layout names
    /// each frame's file.
    pub user: bool,
    pub frames: Vec<Frame>,
}

impl Stack {
    /// The innermost `limit` frames as bpftrace prints them in `mode`: a
    /// newline, then a frame a line.
    pub fn text(&self, mode: StackMode, limit: usize) -> String {
        let mut text = String::from("\n");
        for frame in self.frames.iter().take(limit) {
            let _ = match mode {
                StackMode::Bpftrace => writeln!(text, "        {}", frame.name),
                StackMode::Perf if self.user => writeln!(
                    text,
                    "\t{:x} {} ({})",
                    frame.ip,
                    frame.name,
                    frame.file.as_deref().unwrap_or("[unknown]")
                ),
                StackMode::Perf => writeln!(text, "\t{:x} {}", frame.ip, frame.name),
                StackMode::Raw => writeln!(text, "{:x}", frame.ip),
            };
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack(user: bool) -> Stack {
        let frame = |ip, name: &str, file: Option<&str>| Frame {
            ip,
            name: name.into(),
            file: file.map(Into::into),
        };
        Stack {
            user,
            frames: vec![
                frame(
                    0x7f12_7271_6011,
                    "__GI___libc_open+81",
                    Some("/usr/lib/libc.so.6"),
                ),
                frame(0x0065_6d61_6e74, "0x656d616e74", None),
            ],
        }
    }

    /// The layouts bpftrace 0.17 printed for these frames (`raw` is 0.18's).
    #[test]
    fn each_mode_prints_as_bpftrace_does() {
        let user = stack(true);
        assert_eq!(
            user.text(StackMode::Bpftrace, usize::MAX),
            "\n        __GI___libc_open+81\n        0x656d616e74\n"
        );
        assert_eq!(
            user.text(StackMode::Perf, usize::MAX),
            "\n\t7f1272716011 __GI___libc_open+81 (/usr/lib/libc.so.6)\n\t656d616e74 0x656d616e74 ([unknown])\n"
        );
        assert_eq!(
            stack(false).text(StackMode::Perf, 1),
            "\n\t7f1272716011 __GI___libc_open+81\n"
        );
        assert_eq!(user.text(StackMode::Raw, 2), "\n7f1272716011\n656d616e74\n");
    }
}
