//! Time from timing packets: TSC gives the time stamp counter outright, TMA
//! ties it to the crystal clock (CTC) that MTC packets then advance, and
//! CYC counts core cycles in between, turned into TSC ticks by a ratio that
//! is calibrated from the trace (cycles seen between two MTCs or TSCs) or
//! known from the CBR and the nominal frequency.
//!
//! The arithmetic follows libipt's, integer for integer, so `weft pt dump
//! --time` prints the same times as ptdump and the corpus can test it.

use crate::Errata;
use crate::packet::Packet;

/// Fixed-point shift of the fast-counter:cycles ratio.
const FCR_SHIFT: u32 = 8;
/// CTC bits an MTC carries, and a TMA.
const MTC_BITS: u32 = 8;
const TMA_BITS: u32 = 16;

/// What the trace does not say about the clocks that recorded it: the
/// capture's configuration and the CPU's (perf stores them with the trace).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clocks {
    /// log2 of the CTC period between MTC packets.
    pub mtc_freq: u8,
    /// CPUID leaf 0x15: TSC ticks per CTC tick are `ebx / eax`.
    pub ctc_eax: u32,
    pub ctc_ebx: u32,
    /// The nominal core:bus ratio, for turning a CBR into a cycle ratio.
    pub nom_freq: u8,
    /// Calibrate the cycle ratio from the trace.
    pub calibrate: bool,
    /// Use CYC packets at all.
    pub cycles: bool,
    /// Keep the calibration over an overflow rather than starting again.
    pub keep_calibration_on_overflow: bool,
}

impl Default for Clocks {
    fn default() -> Self {
        Clocks {
            mtc_freq: 0,
            ctc_eax: 0,
            ctc_ebx: 0,
            nom_freq: 0,
            calibrate: true,
            cycles: true,
            keep_calibration_on_overflow: false,
        }
    }
}

/// Why a timing packet could not be used; the texts are libipt's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TimeError {
    #[error("no timing information")]
    NoTime,
    #[error("bad configuration")]
    BadConfig,
    #[error("unexpected packet context")]
    BadContext,
    #[error("unknown packet")]
    BadPacket,
    #[error("internal error")]
    Internal,
}

/// A note about a timing packet that could not be used in full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Note {
    pub what: &'static str,
    pub error: Option<TimeError>,
}

/// The time the trace is at, in TSC ticks, tracked packet by packet.
#[derive(Debug, Clone)]
pub struct Clock {
    clocks: Clocks,
    skl168: bool,
    time: Time,
    cal: Calibration,
    in_header: bool,
}

#[allow(clippy::struct_excessive_bools, reason = "what has been seen so far")]
#[derive(Debug, Clone, Default)]
struct Time {
    tsc: u64,
    /// The time at the last TSC or MTC; CYCs add to it.
    base: u64,
    /// Fast-counter ticks since `base`.
    fc: u64,
    ctc: u32,
    /// The CTC that `fc` counts from.
    ctc_cyc: u32,
    have_tsc: bool,
    have_tma: bool,
    have_mtc: bool,
    lost_cyc: bool,
}

#[derive(Debug, Clone)]
struct Calibration {
    fcr: u64,
    min_fcr: u64,
    max_fcr: u64,
    tsc: u64,
    cyc_tsc: u64,
    cyc_mtc: u64,
    ctc: u32,
    have_mtc: bool,
    check_skl168: bool,
}

impl Default for Calibration {
    fn default() -> Self {
        Calibration {
            fcr: 0,
            min_fcr: u64::MAX,
            max_fcr: 0,
            tsc: 0,
            cyc_tsc: 0,
            cyc_mtc: 0,
            ctc: 0,
            have_mtc: false,
            check_skl168: false,
        }
    }
}

impl Clock {
    pub fn new(clocks: Clocks, errata: Errata) -> Self {
        Clock {
            clocks,
            skl168: errata.skl168,
            time: Time::default(),
            cal: Calibration::default(),
            in_header: false,
        }
    }

    /// Forget everything, as after a decoding error.
    pub fn reset(&mut self) {
        self.time = Time::default();
        self.cal = Calibration::default();
        self.in_header = false;
    }

    /// The time in TSC ticks, once a TSC has been seen.
    pub fn tsc(&self) -> Option<u64> {
        self.time.have_tsc.then_some(self.time.tsc)
    }

    /// The calibrated ratio of fast-counter ticks per core cycle, as CYC
    /// packets are timed with it (ptdump's `--tcal` column).
    pub fn cycle_ratio(&self) -> Result<f64, TimeError> {
        #[allow(
            clippy::cast_precision_loss,
            reason = "printed to 3 decimals, as ptdump does"
        )]
        self.cal
            .fcr()
            .map(|fcr| fcr as f64 / f64::from(1u32 << FCR_SHIFT))
    }

    /// The time as far as the trace tells it, from 0 where no TSC came yet.
    pub fn relative(&self) -> u64 {
        self.time.tsc
    }

    /// Account for one packet. Returns whether it updated the time (so a
    /// listing shows the time next to it); `note` hears what went wrong.
    pub fn update(&mut self, packet: &Packet, note: &mut dyn FnMut(Note)) -> bool {
        let mut report = |what, result: Result<(), TimeError>| {
            if let Err(error) = result {
                note(Note {
                    what,
                    error: Some(error),
                });
            }
        };
        let calibrate = self.clocks.calibrate;
        match *packet {
            Packet::Psb => {
                self.cal.check_skl168 = self.skl168;
                self.in_header = true;
                false
            }
            Packet::PsbEnd => {
                self.in_header = false;
                false
            }
            Packet::Ovf => {
                if self.clocks.keep_calibration_on_overflow {
                    self.cal.forget_spans();
                } else {
                    self.cal = Calibration::default();
                }
                false
            }
            Packet::Tsc(tsc) => {
                if calibrate {
                    report(
                        "error calibrating time",
                        self.cal.on_tsc(tsc, self.in_header),
                    );
                }
                self.time.on_tsc(tsc);
                true
            }
            Packet::Cbr(ratio) => {
                if calibrate {
                    if !self.in_header {
                        // A CBR outside PSB+ is a frequency change.
                        self.cal = Calibration::default();
                    }
                    report(
                        "error calibrating time",
                        self.cal.on_cbr(ratio, &self.clocks),
                    );
                }
                if ratio == 0 {
                    report("error updating time", Err(TimeError::BadPacket));
                }
                false
            }
            Packet::Tma { ctc, fast } => {
                report(
                    "error updating time",
                    self.time.on_tma(ctc, fast, &self.clocks),
                );
                true
            }
            Packet::Mtc(ctc) => {
                if calibrate {
                    report("error calibrating time", self.cal.on_mtc(ctc, &self.clocks));
                }
                report("error updating time", self.time.on_mtc(ctc, &self.clocks));
                true
            }
            Packet::Cyc(cyc) if self.clocks.cycles => {
                self.on_cyc(cyc, note);
                true
            }
            _ => false,
        }
    }

    fn on_cyc(&mut self, cyc: u64, note: &mut dyn FnMut(Note)) {
        let mut fcr = 0;
        if self.clocks.calibrate {
            match self.cal.fcr() {
                Ok(ratio) => fcr = ratio,
                Err(error) => note(Note {
                    what: "calibration error",
                    error: Some(error),
                }),
            }
            self.cal.cyc_mtc = self.cal.cyc_mtc.wrapping_add(cyc);
            self.cal.cyc_tsc = self.cal.cyc_tsc.wrapping_add(cyc);
        }
        match self.time.on_cyc(cyc, fcr, &self.clocks) {
            Err(error) => note(Note {
                what: "error updating time",
                error: Some(error),
            }),
            Ok(()) if fcr == 0 => note(Note {
                what: "error updating time: no calibration",
                error: None,
            }),
            Ok(()) => {}
        }
    }
}

impl Time {
    fn on_tsc(&mut self, tsc: u64) {
        *self = Time {
            tsc,
            base: tsc,
            have_tsc: true,
            ctc_cyc: self.ctc_cyc,
            ..Time::default()
        };
    }

    fn on_tma(&mut self, ctc: u16, fc: u16, clocks: &Clocks) -> Result<(), TimeError> {
        if !self.have_tsc || self.have_tma {
            return Err(TimeError::BadContext);
        }
        if self.have_mtc {
            return Err(TimeError::Internal);
        }
        let mtc_hi = u32::from(clocks.mtc_freq) + MTC_BITS;
        self.have_tma = true;
        self.base = self.base.wrapping_sub(u64::from(fc));
        self.fc = self.fc.wrapping_add(u64::from(fc));
        // Where the TMA carries every CTC bit an MTC would, it counts as one;
        // otherwise the next MTC estimates the missing high bits.
        if mtc_hi <= TMA_BITS {
            self.have_mtc = true;
        }
        self.ctc = u32::from(ctc) & low_bits(mtc_hi);
        self.ctc_cyc = self.ctc;
        Ok(())
    }

    fn on_mtc(&mut self, payload: u8, clocks: &Clocks) -> Result<(), TimeError> {
        let (had_tma, had_mtc) = (self.have_tma, self.have_mtc);
        // MTCs between a TSC and its TMA are ignored: the CTC would seem
        // to jump.
        if self.have_tsc && !had_tma {
            return Ok(());
        }
        let mut last = self.ctc;
        let ctc = u32::from(payload) << clocks.mtc_freq;
        if self.fc != 0 || self.lost_cyc || !had_mtc {
            self.ctc_cyc = ctc;
        }
        self.have_mtc = true;
        self.fc = 0;
        self.ctc = ctc;
        self.lost_cyc = false;
        if !had_mtc {
            // The first MTC after a TMA: guess the CTC bits the TMA lacked
            // from this MTC's (no MTC lost in between). Without a TMA there
            // is nothing to measure from.
            if !had_tma {
                return Ok(());
            }
            if last & !low_bits(TMA_BITS) != 0 {
                return Err(TimeError::Internal);
            }
            let mut high = ctc & !low_bits(TMA_BITS);
            if ctc & low_bits(TMA_BITS) < last {
                high = high.wrapping_sub(1 << TMA_BITS) & (0xff << clocks.mtc_freq);
            }
            last |= high;
        }
        let delta = ctc_delta(ctc, last, clocks)?;
        self.base = self.base.wrapping_add(ctc_to_fc(u64::from(delta), clocks)?);
        self.tsc = self.base;
        Ok(())
    }

    fn on_cyc(&mut self, mut cyc: u64, fcr: u64, clocks: &Clocks) -> Result<(), TimeError> {
        if fcr == 0 {
            self.lost_cyc = true;
            return Ok(());
        }
        if self.fc == 0 {
            cyc = self.cycles_this_period(cyc, fcr, clocks)?;
        }
        // Wrapping as libipt's unsigned arithmetic does on absurd counts.
        self.fc = self.fc.wrapping_add(cyc.wrapping_mul(fcr) >> FCR_SHIFT);
        self.tsc = self.base.wrapping_add(self.fc);
        Ok(())
    }

    /// The first CYC after MTCs counts cycles since the CTC it started
    /// from: take off those of earlier MTC periods, already accounted for.
    fn cycles_this_period(&self, cyc: u64, fcr: u64, clocks: &Clocks) -> Result<u64, TimeError> {
        if self.ctc == self.ctc_cyc {
            return Ok(cyc);
        }
        let delta = ctc_delta(self.ctc, self.ctc_cyc, clocks)?;
        let old = (ctc_to_fc(u64::from(delta), clocks)? << FCR_SHIFT) / fcr;
        Ok(cyc.max(old) - old)
    }
}

impl Calibration {
    fn fcr(&self) -> Result<u64, TimeError> {
        if self.min_fcr <= self.max_fcr {
            Ok(self.fcr)
        } else {
            Err(TimeError::NoTime)
        }
    }

    fn set_fcr(&mut self, fcr: u64) {
        self.fcr = fcr;
        self.min_fcr = self.min_fcr.min(fcr);
        self.max_fcr = self.max_fcr.max(fcr);
    }

    /// After an overflow the cycles counted so far span a gap.
    fn forget_spans(&mut self) {
        self.tsc = 0;
        self.cyc_tsc = 0;
        self.cyc_mtc = 0;
        self.ctc = 0;
        self.have_mtc = false;
    }

    /// A TSC in PSB+ calibrates against the previous TSC (when no MTCs do);
    /// one outside PSB+ may follow lost time and only starts a span.
    fn on_tsc(&mut self, tsc: u64, in_header: bool) -> Result<(), TimeError> {
        let (last, cyc) = (self.tsc, self.cyc_tsc);
        self.tsc = tsc;
        self.cyc_tsc = 0;
        if !in_header || last == 0 || cyc == 0 || self.have_mtc {
            return Ok(());
        }
        let mut tsc = tsc;
        if tsc < last {
            tsc += 1 << 56;
            if tsc < last {
                return Err(TimeError::BadPacket);
            }
        }
        let delta = tsc - last;
        if delta >> (64 - FCR_SHIFT) != 0 {
            return Err(TimeError::Internal);
        }
        self.set_fcr((delta << FCR_SHIFT) / cyc);
        Ok(())
    }

    fn on_cbr(&mut self, ratio: u8, clocks: &Clocks) -> Result<(), TimeError> {
        if clocks.nom_freq == 0 {
            return Ok(());
        }
        if ratio == 0 {
            return Err(TimeError::BadPacket);
        }
        self.set_fcr((u64::from(clocks.nom_freq) << FCR_SHIFT) / u64::from(ratio));
        Ok(())
    }

    fn on_mtc(&mut self, payload: u8, clocks: &Clocks) -> Result<(), TimeError> {
        let (last, cyc, check_skl168) = (self.ctc, self.cyc_mtc, self.check_skl168);
        self.check_skl168 = false;
        let ctc = u32::from(payload) << clocks.mtc_freq;
        if !self.have_mtc {
            self.cyc_mtc = 0;
            self.ctc = ctc;
            self.have_mtc = true;
            return Ok(());
        }
        // Without cycles, spread the next ones over both MTC periods.
        if cyc == 0 {
            return Ok(());
        }
        self.cyc_mtc = 0;
        self.ctc = ctc;
        let delta = ctc_delta(ctc, last, clocks)?;
        let fc = ctc_to_fc(u64::from(delta), clocks)?;
        if fc >> (64 - FCR_SHIFT) != 0 {
            return Err(TimeError::Internal);
        }
        let fc = fc << FCR_SHIFT;
        // SKL168: CYCs just before a PSB may be lost. Skip the first MTC
        // after one when MTCs were lost or a wrap CYC seems to be.
        if check_skl168 {
            if 1 << clocks.mtc_freq < delta {
                return Ok(());
            }
            if clocks.mtc_freq < 10 && self.fcr().is_ok() {
                let expected = self.fcr.wrapping_mul(cyc.wrapping_add(0xf00)) >> FCR_SHIFT;
                if expected < fc {
                    return Ok(());
                }
            }
        }
        self.set_fcr(fc / cyc);
        Ok(())
    }
}

fn low_bits(n: u32) -> u32 {
    (1 << n) - 1
}

/// CTC ticks from `last` to `ctc`, over one wrap of the bits MTCs carry.
fn ctc_delta(ctc: u32, last: u32, clocks: &Clocks) -> Result<u32, TimeError> {
    let mut ctc = ctc;
    if ctc < last {
        ctc += 1 << (u32::from(clocks.mtc_freq) + MTC_BITS);
        if ctc < last {
            return Err(TimeError::BadPacket);
        }
    }
    Ok(ctc - last)
}

/// CTC ticks in TSC ticks.
fn ctc_to_fc(ctc: u64, clocks: &Clocks) -> Result<u64, TimeError> {
    if clocks.ctc_eax == 0 || clocks.ctc_ebx == 0 {
        return Err(TimeError::BadConfig);
    }
    Ok(ctc * u64::from(clocks.ctc_ebx) / u64::from(clocks.ctc_eax))
}

/// The TSC and `CLOCK_MONOTONIC` read together before and after a window,
/// so that the trace's TSC times become the monotonic ns `weft record`
/// stores and a call lines up with the syscalls of the same instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TscClock {
    /// TSC readings, first and last.
    pub tsc: [u64; 2],
    /// The `CLOCK_MONOTONIC` ns of each.
    pub ns: [u64; 2],
}

impl TscClock {
    /// The monotonic ns of `tsc`, on the line through the two readings
    /// (beyond them too: a trace's first TSC comes after the first one).
    pub fn ns(&self, tsc: u64) -> u64 {
        let ticks = i128::from(self.tsc[1]) - i128::from(self.tsc[0]);
        let ns = i128::from(self.ns[1]) - i128::from(self.ns[0]);
        let since = i128::from(tsc) - i128::from(self.tsc[0]);
        let offset = if ticks > 0 { since * ns / ticks } else { 0 };
        u64::try_from((i128::from(self.ns[0]) + offset).max(0)).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::TscClock;

    #[test]
    fn tsc_times_fall_on_the_line_through_the_two_readings() {
        let clock = TscClock {
            tsc: [1_000_000, 3_000_000],
            ns: [5_000_000_000, 5_001_000_000],
        };
        assert_eq!(clock.ns(1_000_000), 5_000_000_000);
        assert_eq!(clock.ns(2_000_000), 5_000_500_000);
        assert_eq!(clock.ns(3_000_000), 5_001_000_000);
        // Before the first reading and after the last too.
        assert_eq!(clock.ns(0), 4_999_500_000);
        assert_eq!(clock.ns(5_000_000), 5_002_000_000);
    }
}
