//! `cargo xtask test`: setup, build, then every test: formatting, lints, unit
//! tests, the root integration tests against the running kernel, and the
//! same tests inside VMs booting Debian's 6.1 and 6.12 kernels.

use std::process::Command;

use anyhow::{Result, bail};

use crate::{
    exec::{exec, is_root, workspace_root},
    fuzz_pt, install,
    run::build_weft_release,
    setup, vm,
};

#[derive(clap::Args)]
pub struct Options {
    /// Only run integration tests whose name contains this.
    #[arg(long)]
    filter: Option<String>,
    /// Skip `cargo fmt --check` and clippy.
    #[arg(long)]
    no_lint: bool,
    /// Skip the kernel matrix (the tests again inside VMs booting Debian's
    /// 6.1 and 6.12 kernels, both at once, four to five minutes under TCG).
    #[arg(long)]
    no_vm: bool,
}

pub fn run(options: &Options) -> Result<()> {
    let mut phases = Phases::default();
    phases.time("setup", setup::run)?;
    let root = workspace_root();
    let cargo = || {
        let mut cmd = Command::new("cargo");
        cmd.current_dir(&root);
        cmd
    };
    if !options.no_lint {
        phases.time("fmt and clippy", || {
            exec(cargo().args(["fmt", "--all", "--check"]))?;
            exec(cargo().args([
                "clippy",
                "--locked",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ]))
        })?;
    }
    let unit = || {
        let mut cmd = cargo();
        cmd.args(["test", "--locked", "--workspace", "--exclude", "weft-tests"]);
        cmd
    };
    phases.time("unit test build", || exec(unit().arg("--no-run")))?;
    // The store's fuzz loop over damaged captures gets a minute, and so does
    // the PT flow decoder against its model and libipt, at the same time:
    // each is one thread, and together they were two minutes with one core idle.
    phases.time("unit tests and PT decoder fuzz", || {
        std::thread::scope(|scope| {
            let fuzz = scope.spawn(|| fuzz_pt::for_seconds(60));
            let tests = exec(unit().env("WEFT_FUZZ_SECONDS", "60"));
            let fuzz = fuzz.join().expect("the PT fuzz thread panicked");
            tests.and(fuzz)
        })
    })?;
    let weft = phases.time("release build", build_weft_release)?;
    phases.time("install into a scratch prefix", || {
        install::check(std::path::Path::new(&weft))
    })?;
    if !is_root() {
        bail!("the kernel tests need root: run `sudo -E cargo xtask test`");
    }
    // In release, as the VMs run them: the test binary is built once.
    let mut integration = cargo();
    integration
        .args([
            "test",
            "--locked",
            "--release",
            "--package",
            "weft-tests",
            "--",
            "--test-threads=1",
        ])
        .env("WEFT_BIN", weft)
        .env("WEFT_PYTHON", setup::duckdb_python())
        .env("WEFT_FLAMEGRAPH", setup::flamegraph());
    if let Some(filter) = &options.filter {
        integration.arg(filter);
    }
    phases.time("kernel tests on this host", || exec(&mut integration))?;
    if options.no_vm {
        return Ok(());
    }
    phases.time("kernel tests in VMs", || {
        vm::run(&vm::Options {
            kernel: vec!["6.1".into(), "6.12".into()],
            filter: options.filter.clone(),
            timeout: 1800,
            accel: "auto".into(),
        })
    })
}

/// How long each phase of the run took, printed when the run ends,
/// however it ends: what to make faster, and where a CI run spent its time.
#[derive(Default)]
struct Phases(Vec<(&'static str, std::time::Duration)>);

impl Phases {
    fn time<T>(&mut self, name: &'static str, phase: impl FnOnce() -> Result<T>) -> Result<T> {
        let start = std::time::Instant::now();
        let result = phase();
        self.0.push((name, start.elapsed()));
        result
    }
}

impl Drop for Phases {
    fn drop(&mut self) {
        let total: std::time::Duration = self.0.iter().map(|(_, d)| *d).sum();
        println!("cargo xtask test: time per phase");
        for (name, duration) in &self.0 {
            println!("  {:>7.1} min  {name}", duration.as_secs_f64() / 60.0);
        }
        println!("  {:>7.1} min  in all", total.as_secs_f64() / 60.0);
    }
}
