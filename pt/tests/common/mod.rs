//! The vendored libipt corpus (`tests/libipt/`, see its README.md), shared
//! by the agreement and damaged-trace tests.

#![allow(dead_code, reason = "each test binary uses a part of this module")]

use std::path::{Path, PathBuf};

use serde_json::Value;
use weft_pt::Errata;
use weft_pt::image::Image;
use weft_pt::pevent::{self, Channel};
use weft_pt::sideband::Sideband;

/// One test of the corpus, as `manifest.json` describes it.
pub struct Case(Value);

pub fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(corpus().join("manifest.json")).expect("manifest.json");
    let mut manifest: Value = serde_json::from_str(&text).expect("manifest parses");
    let Value::Array(tests) = manifest["tests"].take() else {
        panic!("manifest.json has no tests list");
    };
    tests.into_iter().map(Case).collect()
}

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/libipt")
}

impl Case {
    pub fn dir(&self) -> &str {
        self.str("dir")
    }

    /// A string field of the manifest entry ("" where absent).
    pub fn str(&self, key: &str) -> &str {
        self.0[key].as_str().unwrap_or_default()
    }

    /// The first expected output of `key` (`ptdump_exp`, `ptxed_exp`).
    pub fn expected(&self, key: &str) -> Option<String> {
        let name = self.0[key].as_array()?.first()?.as_str()?;
        Some(std::fs::read_to_string(corpus().join(name)).expect("expected output"))
    }

    pub fn has_sideband(&self) -> bool {
        self.0["sideband"]
            .as_array()
            .is_some_and(|sb| !sb.is_empty())
    }

    /// The sideband session of a test: its channels, configured as their file
    /// names say (`NAME-pevent-primary,sample-type=0x4,time-zero=0x0,...`),
    /// and its code files read from the test's folder.
    pub fn sideband(&self) -> Sideband<'_> {
        let channels = self
            .sideband_files()
            .into_iter()
            .map(|(name, file)| {
                let settings = name.rsplit_once("-pevent-").expect("a pevent file").1;
                let settings = settings.trim_end_matches(".sb");
                let mut config = pevent::Config::default();
                let mut primary = false;
                for setting in settings.split(',') {
                    let (key, value) = setting.split_once('=').unwrap_or((setting, "0"));
                    let value =
                        u64::from_str_radix(value.trim_start_matches("0x"), 16).expect("hex");
                    match key {
                        "primary" => primary = true,
                        "secondary" => {}
                        "sample-type" => config.sample_type = value,
                        "time-zero" => config.time_zero = value,
                        "time-shift" => config.time_shift = u16::try_from(value).expect("a shift"),
                        "time-mult" => config.time_mult = u32::try_from(value).expect("a factor"),
                        _ => panic!("{name}: unknown setting {key}"),
                    }
                }
                Channel::new(&name, file, config, primary)
            })
            .collect();
        Sideband::new(channels, Box::new(|name| self.file(name)))
    }

    /// The sideband files: each one's name (as ptdump and ptxed were given
    /// it, in the test's folder) and contents.
    pub fn sideband_files(&self) -> Vec<(String, Vec<u8>)> {
        let files = self.0["sideband"].as_array().cloned().unwrap_or_default();
        files
            .iter()
            .map(|file| {
                let path = corpus().join(file.as_str().expect("a file name"));
                let name = path
                    .file_name()
                    .expect("a name")
                    .to_string_lossy()
                    .into_owned();
                (name, std::fs::read(&path).expect("sideband"))
            })
            .collect()
    }

    /// A file of the test's folder, as the sideband names it.
    pub fn file(&self, name: &str) -> std::io::Result<Vec<u8>> {
        std::fs::read(corpus().join(self.dir()).join(name))
    }

    pub fn trace(&self) -> Vec<u8> {
        std::fs::read(corpus().join(self.str("pt"))).expect("trace")
    }

    /// The bytes of the test's code file.
    pub fn code(&self) -> Vec<u8> {
        std::fs::read(corpus().join(self.str("bin"))).expect("code")
    }

    /// The test's code, at the address its `org` directive gave it.
    pub fn image(&self) -> Image {
        let code = self.code();
        let org = u64::from_str_radix(self.str("org").trim_start_matches("0x"), 16).expect("org");
        let mut image = Image::new();
        image.add(org, code);
        image
    }

    pub fn errata(&self) -> Errata {
        match self.str("cpu") {
            "" => Errata::default(),
            cpu => Errata::for_cpu(cpu.parse().expect("cpu")),
        }
    }
}
