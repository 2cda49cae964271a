#!/usr/bin/env python3
"""Regenerates this corpus from libipt's own tests (see README.md).

    generate.py LIBIPT_CHECKOUT PTTC PTDUMP

runs libipt's test compiler `pttc` (built with `-DPTTC=ON -DPEVENT=ON`;
needs `yasm`) on every `test/src/*.ptt` and `test/pevent/src/*.ptt` of the
checkout, once per `; cpu` directive (once when it has none), and
keeps per run the trace, the code, the sideband and the expected outputs,
with `manifest.json` describing each. `PTDUMP` (libipt's own, built from the
same checkout) checks that the listings it prints are the expected ones.
"""

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def directive(text, name):
    """Every value of a `; name VALUE` comment line of a .ptt."""
    pattern = re.compile(rf"^\s*;\s*{name}\s+(.*?)\s*$", re.MULTILINE)
    return pattern.findall(text)


def keyword(text, name, default):
    """The value of a `name VALUE` assembler line (`org`, `bits`)."""
    found = re.search(rf"^\s*{name}\s+(\S+)", text, re.MULTILINE | re.IGNORECASE)
    return found.group(1) if found else default


def run(ptt, cpu, pttc, ptdump, out):
    """One pttc run of `ptt` (for `cpu`), its files kept in `out`."""
    text = ptt.read_text()
    name = ptt.stem
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        shutil.copy(ptt, work)
        args = [pttc] + (["--cpu", cpu] if cpu else []) + [ptt.name]
        subprocess.run(args, cwd=work, check=True, capture_output=True)
        dir_name = f"{name}@cpu_{cpu}" if cpu else name
        target = out / dir_name
        target.mkdir(parents=True, exist_ok=True)
        files = {}
        for made in sorted(work.iterdir()):
            if made.suffix in (".pt", ".bin", ".exp", ".sb"):
                shutil.copy(made, target)
                files.setdefault(made.suffix, []).append(f"{dir_name}/{made.name}")
    ptdump_opts = " ".join(directive(text, "opt:ptdump"))
    ptxed_opts = " ".join(directive(text, "opt:ptxed"))
    exps = files.get(".exp", [])
    entry = {
        "dir": dir_name,
        "test": name,
        "cpu": cpu or "",
        "org": keyword(text, "org", "0x0"),
        "bits": int(keyword(text, "bits", "64")),
        "pt": files[".pt"][0],
        "bin": files[".bin"][0],
        "ptdump_exp": [e for e in exps if "-ptdump" in e],
        "ptxed_exp": [e for e in exps if "-ptxed" in e],
        "sideband": files.get(".sb", []),
        "ptdump_opts": ptdump_opts,
        "ptxed_opts": ptxed_opts,
        "pt_directives": sorted(
            set(re.findall(r"@pt\s+\w+:\s*([a-z_.]+)", text))
        ),
    }
    entry["ptdump_check_here"] = check_ptdump(entry, cpu, ptdump, out)
    entry["simple_flow_case"] = bool(
        entry["ptxed_exp"] and not ptxed_opts and not entry["sideband"] and not cpu
    )
    return entry


def check_ptdump(entry, cpu, ptdump, out):
    """Whether libipt's ptdump prints the expected listing here."""
    if not entry["ptdump_exp"] or entry["sideband"]:
        return "n/a"
    args = [ptdump] + (["--cpu", cpu] if cpu else [])
    args += entry["ptdump_opts"].split() + [str(out / entry["pt"])]
    got = subprocess.run(args, capture_output=True, text=True).stdout
    want = (out / entry["ptdump_exp"][0]).read_text()
    return "PASS" if got.split() == want.split() else "FAIL"


def main():
    checkout, pttc, ptdump = (Path(a).resolve() for a in sys.argv[1:4])
    commit = subprocess.run(
        ["git", "-C", str(checkout), "log", "-1", "--format=%H %cd"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    for old in HERE.iterdir():
        if old.is_dir():
            shutil.rmtree(old)
    tests = []
    ptts = sorted((checkout / "test").rglob("*.ptt"), key=lambda p: p.name)
    for ptt in ptts:
        for cpu in directive(ptt.read_text(), "cpu") or [None]:
            tests.append(run(ptt, cpu, pttc, ptdump, HERE))
    shutil.copy(checkout / "LICENSE", HERE / "LICENSE")
    (HERE / "SOURCE_COMMIT").write_text(commit + "\n")
    yasm = subprocess.run(["yasm", "--version"], capture_output=True, text=True)
    manifest = {
        "generated_by": "pttc and ptdump built from intel/libipt (commit in "
        f"SOURCE_COMMIT), {yasm.stdout.splitlines()[0]}, by generate.py",
        "count": len(tests),
        "tests": tests,
    }
    (HERE / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"{len(tests)} runs of {len({t['test'] for t in tests})} tests")


if __name__ == "__main__":
    main()
