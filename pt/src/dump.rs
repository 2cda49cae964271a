//! `weft pt dump`: one line per packet in the layout of libipt's ptdump
//! (offset, name, payload, detail), so listings can be compared with it.

use std::fmt::Write as _;
use std::io::{self, Write};

use crate::Errata;
use crate::packet::{self, IpKind, Packet, Packets};
use crate::sideband::{SampleFormat, Sideband};
use crate::time::{Clock, Clocks, Note};

/// What the listing shows.
#[derive(Debug, Clone, Copy)]
#[allow(
    clippy::struct_excessive_bools,
    reason = "ptdump's switches, one field each"
)]
pub struct Options {
    /// Print each packet's offset in the stream.
    pub offsets: bool,
    /// Start at the first PSB (as a decoder must) rather than at byte 0.
    pub sync: bool,
    /// Errata of the CPU that recorded the trace.
    pub errata: Errata,
    /// Show the time next to timing packets, and how.
    pub time: Option<TimeColumn>,
    /// Show the calibrated cycle ratio next to the packets that calibrate
    /// it (TSC, CBR, MTC), as ptdump's `--tcal` does; where both are asked
    /// for, packets that move the time show the time.
    pub tcal: Option<TimeColumn>,
    pub clocks: Clocks,
    /// Show each packet's bytes in hex (ptdump's `--raw`).
    pub raw: bool,
    /// Show the full IP each IP packet gives, its compression undone
    /// against the last IP (`--lastip`).
    pub last_ip: bool,
    /// Show the execution mode a MODE.Exec sets (`--exec-mode`).
    pub exec_mode: bool,
}

/// How `--time` shows the time (ptdump's `--time-delta`, `--no-wall-clock`).
#[derive(Debug, Clone, Copy, Default)]
pub struct TimeColumn {
    /// Show the change since the last time shown rather than the time.
    pub delta: bool,
    /// Count from 0 where the trace has no TSC, rather than reporting
    /// that the time is unknown.
    pub relative: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            offsets: true,
            sync: true,
            errata: Errata::default(),
            time: None,
            tcal: None,
            clocks: Clocks::default(),
            raw: false,
            last_ip: false,
            exec_mode: false,
        }
    }
}

/// Write the listing of `trace`. A decoding error is printed in brackets
/// with its offset and the listing resumes at the next PSB; the count of
/// errors is returned so the caller can exit non-zero.
pub fn dump(trace: &[u8], opts: Options, out: &mut dyn Write) -> io::Result<usize> {
    dump_with(trace, opts, None, out)
}

/// [`dump`], with the records of `sideband` shown where the trace's time
/// reaches them (before the timing packet that gets there), as ptdump's
/// `--pevent` does; those left are shown at the end.
pub fn dump_with(
    trace: &[u8],
    opts: Options,
    mut sideband: Option<(&mut Sideband, SampleFormat)>,
    out: &mut dyn Write,
) -> io::Result<usize> {
    let mut packets = Packets::with_errata(trace, opts.errata);
    let mut errors = 0;
    let mut notes_before = Vec::new();
    if opts.sync && !packets.sync_forward() {
        writeln!(out, "[0: sync error: no PSB in {} bytes]", trace.len())?;
        return Ok(1);
    }
    if let Some((sideband, format)) = &mut sideband {
        sideband.start(&mut |note| notes_before.push(note));
        errors += show_notes(*format, &mut notes_before, out)?;
    }
    let timed = opts.time.is_some() || opts.tcal.is_some() || sideband.is_some();
    let mut time = timed.then(|| Timing {
        time: opts.time,
        tcal: opts.tcal,
        clock: Clock::new(opts.clocks, opts.errata),
        shown: 0,
        shown_ratio: 0.0,
    });
    let mut line = String::new();
    let mut last_ip = LastIp::default();
    while let Some(next) = packets.next_packet() {
        match next {
            Ok((offset, packet)) => {
                line.clear();
                if opts.offsets {
                    let _ = write!(line, "{offset:016x}  ");
                }
                if opts.raw {
                    for byte in &trace[offset..packets.offset()] {
                        let _ = write!(line, "{byte:02x}");
                    }
                    line.push_str("  ");
                }
                let (name, payload, mut detail) = fields(&packet);
                match packet {
                    Packet::Ip { ip, .. } if opts.last_ip => {
                        detail = last_ip.update(offset, ip, out)?;
                    }
                    Packet::ModeExec { cs_l, cs_d, .. } if opts.exec_mode => {
                        detail = match packet::exec_bits(cs_l, cs_d) {
                            Some(bits) => format!("em {bits}-bit"),
                            None => "em unknown".into(),
                        };
                    }
                    _ => {}
                }
                if let Some(time) = &mut time {
                    if matches!(packet, Packet::Cyc(_)) && !opts.clocks.cycles {
                        continue;
                    }
                    if let Some(now) = time.update(offset, &packet, out)? {
                        detail = now;
                    }
                    if let Some((sideband, format)) = &mut sideband
                        && is_timing(&packet)
                    {
                        let tsc = time.clock.tsc().unwrap_or(0);
                        sideband.show_until(tsc, &mut |note| notes_before.push(note));
                        errors += show_notes(*format, &mut notes_before, out)?;
                    }
                }
                columns(name, &payload, &detail, &mut line);
                writeln!(out, "{}", line.trim_end())?;
            }
            Err(err) => {
                errors += 1;
                writeln!(out, "[{err}]")?;
                if !packets.sync_forward() {
                    break;
                }
                if let Some(time) = &mut time {
                    time.clock.reset();
                    time.shown = 0;
                    time.shown_ratio = 0.0;
                }
            }
        }
    }
    if let Some((sideband, format)) = &mut sideband {
        sideband.show_until(u64::MAX, &mut |note| notes_before.push(note));
        errors += show_notes(*format, &mut notes_before, out)?;
    }
    Ok(errors)
}

/// The packets after which ptdump looks for sideband that is due.
fn is_timing(packet: &Packet) -> bool {
    matches!(
        packet,
        Packet::Tsc(_) | Packet::Cbr(_) | Packet::Tma { .. } | Packet::Mtc(_) | Packet::Cyc(_)
    )
}

/// Print (and forget) sideband notes; problems show as ptdump's errors.
/// Returns how many were errors.
fn show_notes(
    format: SampleFormat,
    notes: &mut Vec<crate::sideband::Note>,
    out: &mut dyn Write,
) -> io::Result<usize> {
    let mut errors = 0;
    for note in notes.drain(..).filter(|note| format.shows(note)) {
        if let crate::sideband::Note::Problem { problem, .. } = &note {
            errors += usize::from(problem.is_error());
        }
        match note {
            crate::sideband::Note::Problem {
                channel,
                offset,
                problem,
            } => writeln!(
                out,
                "[{channel}:{offset:016x} sideband error: {}]",
                problem.message()
            )?,
            note => writeln!(out, "{}", note.show(format))?,
        }
    }
    Ok(errors)
}

/// The IP that compressed IPs are relative to (ptdump's `--lastip`,
/// libipt's `pt_last_ip`).
#[derive(Default)]
struct LastIp {
    ip: u64,
    have_ip: bool,
    suppressed: bool,
}

impl LastIp {
    /// Account for an IP packet; the full IP to show next to it.
    fn update(&mut self, offset: usize, ip: packet::Ip, out: &mut dyn Write) -> io::Result<String> {
        match ip.resolve(self.ip) {
            Some(full) => {
                self.ip = full;
                self.have_ip = true;
                self.suppressed = false;
            }
            None => self.suppressed = true,
        }
        if !self.have_ip {
            writeln!(out, "[{offset:x}: error tracking last-ip: no ip]")?;
            return Ok("ip <unavailable>".into());
        }
        Ok(if self.suppressed {
            "ip <suppressed>".into()
        } else {
            format!("ip {:016x}", self.ip)
        })
    }
}

/// The time and calibration columns: the clock, and what each last showed.
struct Timing {
    time: Option<TimeColumn>,
    tcal: Option<TimeColumn>,
    clock: Clock,
    shown: u64,
    shown_ratio: f64,
}

impl Timing {
    /// Account for `packet`; the time to show next to it, if it has one.
    /// Notes about unusable timing packets are printed as ptdump does.
    fn update(
        &mut self,
        offset: usize,
        packet: &Packet,
        out: &mut dyn Write,
    ) -> io::Result<Option<String>> {
        let mut notes = Vec::new();
        let timed = self.clock.update(packet, &mut |note| notes.push(note));
        for Note { what, error } in notes {
            match error {
                Some(error) => writeln!(out, "[{offset:x}: {what}: {error}]")?,
                None => writeln!(out, "[{offset:x}: {what}]")?,
            }
        }
        let mut detail = None;
        if let Some(column) = self.tcal
            && matches!(packet, Packet::Tsc(_) | Packet::Cbr(_) | Packet::Mtc(_))
        {
            detail = Some(self.ratio(offset, column, out)?);
        }
        match self.time {
            Some(column) if timed => self.time(offset, column, out).map(Some),
            _ => Ok(detail),
        }
    }

    /// The cycle ratio, or how it changed since last shown.
    fn ratio(
        &mut self,
        offset: usize,
        column: TimeColumn,
        out: &mut dyn Write,
    ) -> io::Result<String> {
        let ratio = match self.clock.cycle_ratio() {
            Ok(ratio) => ratio,
            Err(error) => {
                writeln!(out, "[{offset:x}: error printing time: {error}]")?;
                return Ok("fcr <unavailable>".into());
            }
        };
        if !column.delta {
            return Ok(format!("fcr {ratio:.3}"));
        }
        let before = std::mem::replace(&mut self.shown_ratio, ratio);
        Ok(format!("fcr {:+.3}", ratio - before))
    }

    fn time(
        &mut self,
        offset: usize,
        column: TimeColumn,
        out: &mut dyn Write,
    ) -> io::Result<String> {
        let now = match self.clock.tsc() {
            Some(tsc) => tsc,
            None if column.relative => self.clock.relative(),
            None => {
                writeln!(
                    out,
                    "[{offset:x}: error printing time: no timing information]"
                )?;
                return Ok("tsc <unavailable>".into());
            }
        };
        if !column.delta {
            return Ok(format!("tsc {now:016x}"));
        }
        let before = std::mem::replace(&mut self.shown, now);
        Ok(if now >= before {
            format!("tsc +{:x}", now - before)
        } else {
            format!("tsc -{:x}", before - now)
        })
    }
}

/// `name payload detail` of one packet, in ptdump's columns.
fn columns(name: &str, payload: &str, detail: &str, out: &mut String) {
    if payload.is_empty() && detail.is_empty() {
        out.push_str(name);
    } else if detail.is_empty() {
        let _ = write!(out, "{name:<11}{payload}");
    } else {
        let _ = write!(out, "{name:<11}{payload:<21}{detail}");
    }
}

#[allow(
    clippy::too_many_lines,
    reason = "one arm per packet kind, in the SDM's order"
)]
fn fields(packet: &Packet) -> (&'static str, String, String) {
    let none = String::new;
    match *packet {
        Packet::Pad => ("pad", none(), none()),
        Packet::Psb => ("psb", none(), none()),
        Packet::PsbEnd => ("psbend", none(), none()),
        Packet::Ovf => ("ovf", none(), none()),
        Packet::Stop => ("stop", none(), none()),
        Packet::Tnt { bits, count, long } => {
            let outcomes = (0..count)
                .rev()
                .map(|i| if bits >> i & 1 == 1 { '!' } else { '.' })
                .collect();
            (if long { "tnt.64" } else { "tnt.8" }, outcomes, none())
        }
        Packet::Ip { kind, ip } => (ip_name(kind), ip_payload(ip), none()),
        Packet::ModeExec {
            cs_l,
            cs_d,
            interrupts,
        } => (
            "mode.exec",
            flags(&[(cs_d, "cs.d"), (cs_l, "cs.l"), (interrupts, "if")]),
            none(),
        ),
        Packet::ModeTsx { intx, abort } => (
            "mode.tsx",
            flags(&[(intx, "intx"), (abort, "abrt")]),
            none(),
        ),
        Packet::Pip { cr3, nr } => {
            let payload = if nr {
                format!("{cr3:x}, nr")
            } else {
                format!("{cr3:x}")
            };
            ("pip", payload, format!("cr3 {cr3:016x}"))
        }
        Packet::Tsc(tsc) => ("tsc", format!("{tsc:x}"), none()),
        Packet::Cbr(ratio) => ("cbr", format!("{ratio:x}"), none()),
        Packet::Tma { ctc, fast } => ("tma", format!("{ctc:x}, {fast:x}"), none()),
        Packet::Mtc(ctc) => ("mtc", format!("{ctc:x}"), none()),
        Packet::Cyc(cyc) => ("cyc", format!("{cyc:x}"), none()),
        Packet::Vmcs(base) => ("vmcs", format!("{base:x}"), format!("vmcs {base:016x}")),
        Packet::Mnt(payload) => ("mnt", format!("{payload:x}"), none()),
        Packet::Exstop { ip } => ("exstop", flags(&[(ip, "ip")]), none()),
        Packet::Mwait { hints, ext } => ("mwait", format!("{hints:08x}, {ext:08x}"), none()),
        Packet::Pwre {
            state,
            sub_state,
            hw,
        } => {
            let mut payload = format!("c{}.{}", packet::c_state(state), packet::c_state(sub_state));
            if hw {
                payload.push_str(", hw");
            }
            ("pwre", payload, none())
        }
        Packet::Pwrx {
            last,
            deepest,
            wake,
        } => {
            let reason = packet::wake_name(wake);
            (
                "pwrx",
                format!(
                    "{reason}: c{}, c{}",
                    packet::c_state(last),
                    packet::c_state(deepest)
                ),
                none(),
            )
        }
        Packet::Ptw { payload, size, ip } => {
            let mut text = format!("{size}: {payload:x}");
            if ip {
                text.push_str(", ip");
            }
            ("ptw", text, none())
        }
        Packet::Cfe { kind, vector, ip } => {
            let mut text = kind.to_string();
            // A SIPI's vector is a page number, shown in hex like ptdump.
            match kind {
                5 => drop(write!(text, ": {vector:x}")),
                _ if packet::cfe_has_vector(kind) => drop(write!(text, ": {vector}")),
                _ => {}
            }
            if ip {
                text.push_str(", ip");
            }
            ("cfe", text, format!("type {}", packet::cfe_name(kind)))
        }
        Packet::Evd { kind, payload } => (
            "evd",
            format!("{kind}: {payload:x}"),
            format!("type {}", packet::evd_name(kind)),
        ),
        Packet::Trig { id, icnt, ip, mult } => {
            let mut text = format!("{id:02x}");
            if ip {
                text.push_str(", ip");
            }
            if mult {
                text.push_str(", mult");
            }
            if let Some(icnt) = icnt {
                let _ = write!(text, ", icnt: {icnt}");
            }
            ("trig", text, none())
        }
        Packet::Bbp { wide, kind } => (
            "bbp",
            format!("{kind:x}{}", if wide { ", sz" } else { "" }),
            none(),
        ),
        Packet::Bip { id, payload } => ("bip", format!("{id:x}: {payload:x}"), none()),
        Packet::Bep { ip } => ("bep", flags(&[(ip, "ip")]), none()),
        Packet::Invalid { .. } => ("<invalid>", none(), none()),
    }
}

fn ip_name(kind: IpKind) -> &'static str {
    match kind {
        IpKind::Tip => "tip",
        IpKind::TipPge => "tip.pge",
        IpKind::TipPgd => "tip.pgd",
        IpKind::Fup => "fup",
    }
}

/// `C: hex` with the bytes the packet did not carry shown as `?`.
fn ip_payload(ip: packet::Ip) -> String {
    let known = match ip.compression {
        0 => 0,
        1 => 4,
        2 => 8,
        4 => 12,
        _ => 16,
    };
    let value = match ip.compression {
        3 => ip.resolve(0).unwrap_or(0),
        _ => ip.bits,
    };
    let hex = format!("{value:016x}");
    format!(
        "{}: {}{}",
        ip.compression,
        "?".repeat(16 - known),
        &hex[16 - known..]
    )
}

/// Comma-separated names of the set flags.
fn flags(list: &[(bool, &str)]) -> String {
    let set: Vec<&str> = list
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, name)| *name)
        .collect();
    set.join(", ")
}
