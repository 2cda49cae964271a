//! The limits bpftrace lets a user raise, taken the way bpftrace takes
//! them: `BPFTRACE_*` environment variables, with bpftrace 0.17's defaults.

use weft_abi::oneliner::{MAX_STRING_LEN, STRING_LEN};

/// bpftrace 0.17's largest `BPFTRACE_STRLEN`.
pub const MAX_STRLEN: usize = 200;

/// What a program may fill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `BPFTRACE_MAP_KEYS_MAX`: the keys a map holds; a new key past them
    /// is dropped (and counted, where bpftrace says nothing).
    pub map_keys_max: usize,
    /// `BPFTRACE_STRLEN`: the bytes of a string `str()` reads, its NUL
    /// counted (at most [`MAX_STRLEN`], as in bpftrace).
    pub strlen: usize,
    /// `BPFTRACE_MAX_PROBES`: the attach points a program may have.
    pub max_probes: usize,
    /// `BPFTRACE_CAT_BYTES_MAX`: the bytes `cat()` prints of a file.
    pub cat_bytes_max: usize,
    /// `BPFTRACE_PERF_RB_PAGES`: the pages of each CPU's buffer of the
    /// packets `skboutput()` copies (a power of two, as perf maps them).
    pub perf_rb_pages: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            map_keys_max: 4096,
            strlen: STRING_LEN,
            max_probes: 512,
            cat_bytes_max: 10_240,
            perf_rb_pages: 64,
        }
    }
}

impl Limits {
    /// The limits `var` sets (`std::env::var` or a test's table), the
    /// defaults where it sets none; a value that is no positive number, or
    /// a string length past what weft reads, is an error naming it.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let mut limits = Self::default();
        for (name, limit) in [
            ("BPFTRACE_MAP_KEYS_MAX", &mut limits.map_keys_max),
            ("BPFTRACE_STRLEN", &mut limits.strlen),
            ("BPFTRACE_MAX_PROBES", &mut limits.max_probes),
            ("BPFTRACE_CAT_BYTES_MAX", &mut limits.cat_bytes_max),
            ("BPFTRACE_PERF_RB_PAGES", &mut limits.perf_rb_pages),
        ] {
            let Some(text) = var(name) else { continue };
            *limit = text
                .trim()
                .parse()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("{name}={text}: expected a positive number"))?;
        }
        if !limits.perf_rb_pages.is_power_of_two() || limits.perf_rb_pages > 1 << 16 {
            return Err(format!(
                "BPFTRACE_PERF_RB_PAGES={}: expected a power of two up to 65536",
                limits.perf_rb_pages
            ));
        }
        if limits.strlen > MAX_STRLEN {
            return Err(format!(
                "BPFTRACE_STRLEN={} exceeds the maximum of {MAX_STRLEN} bytes (bpftrace's)",
                limits.strlen
            ));
        }
        Ok(limits)
    }

    /// Bytes of each string slot the kernel fills: `strlen` rounded up to
    /// a power of two for the kernel's masks, and never below the default
    /// (a shorter string is cut when it is printed, as bpftrace cuts it).
    pub fn slot_len(&self) -> usize {
        (self.strlen.next_power_of_two()).clamp(STRING_LEN, MAX_STRING_LEN)
    }

    /// The limits the process's environment sets.
    pub fn from_env() -> Result<Self, String> {
        Self::from_vars(|name| std::env::var(name).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_as_bpftrace_takes_them() {
        let vars = |pairs: &[(&str, &str)]| {
            let pairs: Vec<(String, String)> = pairs
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect();
            Limits::from_vars(move |name| {
                pairs
                    .iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.clone())
            })
        };
        assert_eq!(vars(&[]), Ok(Limits::default()));
        let set = vars(&[("BPFTRACE_MAP_KEYS_MAX", "10"), ("BPFTRACE_STRLEN", "16")]).unwrap();
        assert_eq!(
            (set.map_keys_max, set.strlen, set.max_probes),
            (10, 16, 512)
        );
        assert!(
            vars(&[("BPFTRACE_MAX_PROBES", "many")])
                .unwrap_err()
                .contains("BPFTRACE_MAX_PROBES=many")
        );
        assert!(vars(&[("BPFTRACE_MAP_KEYS_MAX", "0")]).is_err());
        assert_eq!(
            vars(&[("BPFTRACE_PERF_RB_PAGES", "256")]).map(|l| l.perf_rb_pages),
            Ok(256)
        );
        assert!(
            vars(&[("BPFTRACE_PERF_RB_PAGES", "100")])
                .unwrap_err()
                .contains("a power of two")
        );
        assert!(
            vars(&[("BPFTRACE_STRLEN", "201")])
                .unwrap_err()
                .contains("BPFTRACE_STRLEN=201 exceeds the maximum of 200 bytes")
        );
        // The kernel's slots: the default's, or a power of two up to 256.
        let slot = |strlen| {
            Limits {
                strlen,
                ..Limits::default()
            }
            .slot_len()
        };
        assert_eq!(
            [slot(16), slot(64), slot(65), slot(128), slot(200)],
            [64, 64, 128, 128, 256]
        );
    }
}
