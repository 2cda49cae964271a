//! Is Intel PT here? The kernel says so under
//! `/sys/bus/event_source/devices/intel_pt`: its PMU type, the capabilities
//! of the CPU (`caps/*`) and the config bits it accepts (`format/*`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where the kernel lists perf event sources.
pub const SYSFS: &str = "/sys/bus/event_source/devices";

/// What the CPU and kernel offer for PT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caps {
    /// The dynamic PMU type to open `intel_pt` events with.
    pub pmu_type: u32,
    /// `caps/NAME` → its text (e.g. `topa_output` → `1`, `mtc_periods` →
    /// `249`, a hex bitmask).
    pub caps: BTreeMap<String, String>,
    /// `format/NAME` → the config field it names (e.g. `tsc` →
    /// `config:10`).
    pub format: BTreeMap<String, String>,
}

#[derive(Debug, thiserror::Error)]
pub enum Unsupported {
    #[error(
        "Intel PT is not available on this CPU or VM ({dir} does not exist): weft cannot capture PT here; \
         `weft pt dump` and `weft pt flow` still decode traces recorded on other machines"
    )]
    Absent { dir: String },
    #[error("{path}: {what}")]
    Unreadable { path: String, what: String },
}

impl Caps {
    /// Read the PT description under `sysfs` (normally [`SYSFS`]).
    pub fn detect(sysfs: &Path) -> Result<Caps, Unsupported> {
        let dir = sysfs.join("intel_pt");
        if !dir.is_dir() {
            return Err(Unsupported::Absent {
                dir: dir.display().to_string(),
            });
        }
        let type_path = dir.join("type");
        let pmu_type = read(&type_path)?
            .parse()
            .map_err(|_| Unsupported::Unreadable {
                path: type_path.display().to_string(),
                what: "not a number".into(),
            })?;
        let caps = entries(&dir.join("caps"))?.into_iter().collect();
        let format = entries(&dir.join("format"))?.into_iter().collect();
        Ok(Caps {
            pmu_type,
            caps,
            format,
        })
    }

    /// Whether the CPU reports capability `name` (a missing one is absent).
    pub fn has(&self, name: &str) -> bool {
        self.bitmask(name) != 0
    }

    /// A capability read as the hex number the kernel prints (0 where
    /// missing or unreadable).
    pub fn bitmask(&self, name: &str) -> u64 {
        self.caps
            .get(name)
            .and_then(|text| u64::from_str_radix(text, 16).ok())
            .unwrap_or(0)
    }
}

fn read(path: &Path) -> Result<String, Unsupported> {
    std::fs::read_to_string(path)
        .map(|text| text.trim().to_owned())
        .map_err(|e| Unsupported::Unreadable {
            path: path.display().to_string(),
            what: e.to_string(),
        })
}

/// Every file in `dir` with its trimmed contents; an absent dir is empty.
fn entries(dir: &Path) -> Result<Vec<(String, String)>, Unsupported> {
    let Ok(list) = std::fs::read_dir(dir) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for entry in list.flatten() {
        let path: PathBuf = entry.path();
        out.push((
            entry.file_name().to_string_lossy().into_owned(),
            read(&path)?,
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("weft-pt-caps-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn without_the_pmu_directory_pt_is_absent_and_the_message_says_what_still_works() {
        let root = scratch("absent");
        let err = Caps::detect(&root).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, Unsupported::Absent { .. }));
        assert!(text.contains("not available on this CPU or VM"), "{text}");
        assert!(text.contains("weft pt flow"), "{text}");
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_fake_pmu_is_read_with_its_caps_and_format() {
        let root = scratch("present");
        let pt = root.join("intel_pt");
        std::fs::create_dir_all(pt.join("caps")).unwrap();
        std::fs::create_dir_all(pt.join("format")).unwrap();
        std::fs::write(pt.join("type"), "8\n").unwrap();
        std::fs::write(pt.join("caps/topa_output"), "1\n").unwrap();
        std::fs::write(pt.join("caps/mtc"), "0\n").unwrap();
        std::fs::write(pt.join("format/tsc"), "config:10\n").unwrap();
        let caps = Caps::detect(&root).unwrap();
        assert_eq!(caps.pmu_type, 8);
        assert!(caps.has("topa_output"));
        assert!(!caps.has("mtc"));
        assert!(!caps.has("psb_cyc"));
        assert_eq!(caps.format["tsc"], "config:10");
        std::fs::write(pt.join("type"), "eight").unwrap();
        let err = Caps::detect(&root).unwrap_err().to_string();
        assert!(err.contains("intel_pt/type: not a number"), "{err}");
        std::fs::remove_dir_all(root).unwrap();
    }
}
