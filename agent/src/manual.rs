//! Shell completions and man pages, generated from the clap definitions so
//! they never disagree with `--help`.

use std::{
    fs::{self, OpenOptions},
    io::Write as _,
    os::unix::fs::OpenOptionsExt as _,
    path::Path,
    process::ExitCode,
};

use anyhow::{Context as _, Result};
use clap::CommandFactory as _;

use crate::cli::Cli;

/// `weft completions SHELL`: the script, on stdout.
pub fn completions(shell: clap_complete::Shell) -> ExitCode {
    write_completions(shell, &mut std::io::stdout());
    ExitCode::SUCCESS
}

fn write_completions(shell: clap_complete::Shell, out: &mut dyn std::io::Write) {
    clap_complete::generate(shell, &mut Cli::command(), "weft", out);
}

/// `weft man DIR`: `weft.1`, and `weft-COMMAND.1` for each command (and
/// `weft-pt-COMMAND.1` for the PT ones), mode 0600 as every file weft writes.
pub fn man_pages(dir: &Path) -> Result<ExitCode> {
    fs::create_dir_all(dir).with_context(|| format!("failed to create {}", dir.display()))?;
    let mut command = Cli::command();
    command.build();
    let mut written = 0;
    write_page(dir, "weft", &command)?;
    written += 1;
    // Not `help`, which clap adds, nor hidden commands.
    let shown = |c: &&clap::Command| !c.is_hide_set() && c.get_name() != "help";
    for sub in command.get_subcommands().filter(shown) {
        let name = format!("weft-{}", sub.get_name());
        write_page(dir, &name, sub)?;
        written += 1;
        for inner in sub.get_subcommands().filter(shown) {
            write_page(dir, &format!("{name}-{}", inner.get_name()), inner)?;
            written += 1;
        }
    }
    eprintln!("weft: wrote {written} man pages to {}", dir.display());
    Ok(ExitCode::SUCCESS)
}

fn write_page(dir: &Path, name: &str, command: &clap::Command) -> Result<()> {
    let page = clap_mangen::Man::new(command.clone().name(name.to_owned()));
    let mut bytes = Vec::new();
    page.render(&mut bytes)?;
    let path = dir.join(format!("{name}.1"));
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("failed to create {}", path.display()))?;
    file.write_all(&bytes)
        .with_context(|| format!("failed to write {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn bash_takes_the_completions_and_completes_commands_and_flags() {
        let mut script = Vec::new();
        write_completions(clap_complete::Shell::Bash, &mut script);
        let path = std::env::temp_dir().join(format!("weft-completions-{}", std::process::id()));
        fs::write(&path, &script).unwrap();
        // What bash offers after `weft ex` and `weft export --fo`.
        let ask = |line: &str| {
            let words: Vec<&str> = line.split(' ').collect();
            let probe = format!(
                "source {}; COMP_WORDS=({}); COMP_CWORD={}; _weft weft {} {}; echo \"${{COMPREPLY[@]}}\"",
                path.display(),
                words.join(" "),
                words.len() - 1,
                words[words.len() - 1],
                words[words.len() - 2],
            );
            let out = std::process::Command::new("bash")
                .args(["-c", &probe])
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).trim().to_owned()
        };
        assert_eq!(ask("weft ex"), "extract export");
        assert_eq!(ask("weft export --fo"), "--format");
        let _ = fs::remove_file(&path);
    }

    #[test]
    fn a_man_page_for_weft_and_each_command() {
        let dir = std::env::temp_dir().join(format!("weft-man-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        man_pages(&dir).unwrap();
        for name in [
            "weft",
            "weft-record",
            "weft-export",
            "weft-pt-calls",
            "weft-completions",
        ] {
            let path = dir.join(format!("{name}.1"));
            let page = fs::read_to_string(&path).unwrap();
            assert!(page.starts_with(".ie") || page.contains(".TH"), "{name}");
            assert!(page.contains(name), "{name}");
            let mode = fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert!(!dir.join("weft-help.1").exists() && !dir.join("weft-man.1").exists());
        fs::remove_dir_all(&dir).unwrap();
    }
}
