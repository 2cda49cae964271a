//! One synthetic trace per decoding rule that libipt's suite taught the
//! flow decoder (each rule is written down beside its code in `flow.rs`
//! and `packet.rs`): the trace is built here, packet by packet, over a few
//! bytes of code, and the decoder must print what ptxed prints for it.

use weft_pt::Errata;
use weft_pt::encode::Encoder;
use weft_pt::flow::Flow;
use weft_pt::image::Image;
use weft_pt::packet::{IpKind, Packet, Packets};

const CODE: u64 = 0x1000;
const NOP: u8 = 0x90;
const HLT: u8 = 0xf4;

/// `bytes` at [`CODE`].
fn image(bytes: &[u8]) -> Image {
    let mut image = Image::new();
    image.add(CODE, bytes.to_vec());
    image
}

/// What the decoder prints, line by line, as `weft pt flow` does.
fn flow(trace: &[u8], image: &Image, errata: Errata) -> Vec<String> {
    let mut lines = Vec::new();
    Flow::new(trace, image, errata).run(&mut |step| lines.push(step.to_string()));
    lines
}

/// A PSB+ that starts tracing at `ip` in 64-bit mode.
fn start_at(ip: u64) -> Encoder {
    let mut trace = Encoder::new();
    trace.psb();
    trace.mode_64();
    trace.ip(IpKind::Fup, Some(ip));
    trace.psbend();
    trace
}

/// Tracing stops asynchronously at `ip`.
fn stop_at(trace: &mut Encoder, ip: u64) {
    trace.ip(IpKind::Fup, Some(ip));
    trace.ip(IpKind::TipPgd, None);
}

fn at(offset: u64) -> String {
    format!("{:016x}", CODE + offset)
}

/// MNT: a maintenance packet with its 8-byte payload.
fn mnt(trace: &mut Vec<u8>, payload: u64) {
    trace.extend([0x02, 0xc3, 0x88]);
    trace.extend(payload.to_le_bytes());
}

#[test]
fn jmpabs_takes_the_tip_as_an_indirect_jump_does() {
    // jmpabs 0x2000 (REX2 d5 00, opcode a1, imm64); the TIP says where it
    // went and wins over the immediate.
    let mut code = vec![0xd5, 0x00, 0xa1];
    code.extend(0x2000u64.to_le_bytes());
    code.extend([NOP, HLT]);
    let mut trace = start_at(CODE);
    trace.ip(IpKind::Tip, Some(CODE + 11));
    stop_at(&mut trace, CODE + 12);
    let got = flow(trace.bytes(), &image(&code), Errata::default());
    assert_eq!(got, [at(0), at(11), "[disabled]".into()]);
}

/// Tracing at CODE, then OVF and MNT; tracing resumes at CODE + 1 with
/// `resume` (a FUP, or a TIP.PGE) and stops at CODE + 2.
fn overflow_mnt_then(resume: IpKind) -> Vec<u8> {
    let mut trace = start_at(CODE);
    trace.ovf();
    let mut trace = trace.into_bytes();
    mnt(&mut trace, 0xa000);
    let mut rest = Encoder::new();
    rest.ip(resume, Some(CODE + 1));
    stop_at(&mut rest, CODE + 2);
    trace.extend(rest.bytes());
    trace
}

#[test]
fn events_between_an_overflow_and_its_fup_come_before_the_overflow() {
    // OVF, MNT, FUP: tracing resumes at the FUP, where the overflow is
    // reported; the MNT that stands alone before it comes first.
    let code = [HLT, NOP, NOP, HLT];
    let trace = overflow_mnt_then(IpKind::Fup);
    let got = flow(&trace, &image(&code), Errata::default());
    assert_eq!(
        got,
        ["[mnt: a000]", "[overflow]", &at(1), "[disabled]"].map(String::from)
    );
}

#[test]
fn an_overflow_without_a_fup_is_reported_at_once() {
    // OVF, MNT, TIP.PGE: tracing was off after the overflow.
    let code = [HLT, NOP, HLT];
    let trace = overflow_mnt_then(IpKind::TipPge);
    let got = flow(&trace, &image(&code), Errata::default());
    assert_eq!(
        got,
        [
            "[overflow]",
            "[mnt: a000]",
            "[enabled]",
            &at(1),
            "[disabled]"
        ]
        .map(String::from)
    );
}

#[test]
fn a_psb_while_tracing_lets_the_flow_run_up_to_its_fup() {
    // Tracing at CODE; the next PSB+ names CODE + 2: the two NOPs before it
    // ran. Then tracing stops at CODE + 3.
    let code = [NOP, NOP, NOP, HLT];
    let mut trace = start_at(CODE);
    trace.psb();
    trace.ip(IpKind::Fup, Some(CODE + 2));
    trace.mode_64();
    trace.psbend();
    stop_at(&mut trace, CODE + 3);
    let got = flow(trace.bytes(), &image(&code), Errata::default());
    assert_eq!(got, [at(0), at(1), at(2), "[disabled]".into()]);
}

#[test]
fn skd010_a_tip_pgd_after_an_overflow_leaves_tracing_off() {
    // OVF, then TIP.PGD where a FUP was due: the erratum dropped the FUP.
    let code = [HLT, HLT, NOP, HLT];
    let mut trace = start_at(CODE);
    trace.ovf();
    trace.ip(IpKind::TipPgd, Some(CODE + 1));
    trace.ip(IpKind::TipPge, Some(CODE + 2));
    stop_at(&mut trace, CODE + 3);
    let skd010 = Errata {
        skd010: true,
        ..Errata::default()
    };
    let got = flow(trace.bytes(), &image(&code), skd010);
    assert_eq!(
        got,
        ["[overflow]", "[enabled]", &at(2), "[disabled]"].map(String::from)
    );
    // Without the erratum that TIP.PGD is out of place.
    let plain = flow(trace.bytes(), &image(&code), Errata::default());
    assert!(plain[1].contains("error"), "{plain:?}");
}

#[test]
fn skd007_an_ovf_in_place_of_a_cycs_second_byte_is_an_ovf() {
    // A 2-byte CYC whose second byte is 0x02, then 0xf3.
    let trace = [0xf7, 0x02, 0xf3, 0x00];
    let packets = |errata| -> Vec<(usize, Packet)> {
        Packets::with_errata(&trace, errata)
            .map(Result::unwrap)
            .collect()
    };
    let skd007 = Errata {
        skd007: true,
        ..Errata::default()
    };
    assert_eq!(packets(skd007), [(0, Packet::Ovf), (3, Packet::Pad)]);
    assert!(matches!(packets(Errata::default())[0], (0, Packet::Cyc(_))));
}

#[test]
fn a_trigger_prints_its_bits_in_two_hex_digits() {
    // TRIG: opcode d9, flags (0x20: mult), trigger bits 1.
    let code = [HLT];
    let mut trace = Encoder::new();
    trace.psb();
    trace.psbend();
    let mut trace = trace.into_bytes();
    trace.extend([0xd9, 0x20, 0x01]);
    let got = flow(&trace, &image(&code), Errata::default());
    assert_eq!(got[0], "[trig 01, mult]");
}

#[test]
fn a_ptwrite_event_follows_its_instruction() {
    // nop; ptwrite eax; nop; nop. A PTW without IP, sent before the NOP at
    // CODE ran, belongs to the PTWRITE at CODE + 1 and is shown after it.
    let code = [NOP, 0xf3, 0x0f, 0xae, 0xe0, NOP, HLT];
    let mut trace = start_at(CODE).into_bytes();
    // PTW: 02, header 0x12 (payload of 4 bytes, no IP), payload.
    trace.extend([0x02, 0x12]);
    trace.extend(0xabcd_u32.to_le_bytes());
    let mut rest = Encoder::new();
    stop_at(&mut rest, CODE + 6);
    trace.extend(rest.bytes());
    let got = flow(&trace, &image(&code), Errata::default());
    assert_eq!(
        got,
        [&at(0), &at(1), "[ptwrite: abcd]", &at(5), "[disabled]"].map(String::from)
    );
}

#[test]
fn a_transaction_state_while_tracing_is_off_comes_before_enabled() {
    // MODE.TSX (begin) while off, then TIP.PGE: tracing resumes inside
    // the transaction, its instructions speculative.
    let code = [NOP, NOP, HLT];
    let mut trace = Encoder::new();
    trace.psb();
    trace.mode_64();
    trace.psbend();
    let mut trace = trace.into_bytes();
    // MODE.TSX: 99, leaf 1 in bits 7:5, InTX in bit 0.
    trace.extend([0x99, 0x21]);
    let mut rest = Encoder::new();
    rest.ip(IpKind::TipPge, Some(CODE));
    stop_at(&mut rest, CODE + 1);
    trace.extend(rest.bytes());
    let got = flow(&trace, &image(&code), Errata::default());
    assert_eq!(
        got,
        [
            "[begin transaction]",
            "[enabled]",
            &format!("? {}", at(0)),
            "[disabled]"
        ]
        .map(String::from)
    );
}

/// PIP (CR3 0xcdcdc0, not a VM guest) and VMCS (base 0xcdcdc000), in
/// that order.
fn pip_then_vmcs(trace: &mut Vec<u8>) {
    trace.extend([0x02, 0x43]);
    trace.extend(&((0x00cd_cdc0_u64 >> 5) << 1).to_le_bytes()[..6]);
    trace.extend([0x02, 0xc8]);
    trace.extend(&(0xcdcd_c000_u64 >> 12).to_le_bytes()[..5]);
}

#[test]
fn pip_and_vmcs_in_an_asynchronous_disable_follow_it_vmcs_first() {
    let code = [NOP, HLT];
    let mut trace = start_at(CODE);
    trace.ip(IpKind::Fup, Some(CODE + 1));
    let mut trace = trace.into_bytes();
    pip_then_vmcs(&mut trace);
    trace.push(0x01); // TIP.PGD, IP suppressed
    let got = flow(&trace, &image(&code), Errata::default());
    let want = [
        &at(0),
        "[disabled]",
        "[vmcs, base: 00000000cdcdc000]",
        "[paging, cr3: 0000000000cdcdc0]",
    ];
    assert_eq!(got, want.map(String::from));
}

#[test]
fn pip_and_vmcs_before_a_vm_entry_come_in_the_traces_order() {
    // vmlaunch, whose TIP.PGD disables tracing.
    let code = [0x0f, 0x01, 0xc2, HLT];
    let mut trace = start_at(CODE).into_bytes();
    pip_then_vmcs(&mut trace);
    let mut rest = Encoder::new();
    rest.ip(IpKind::TipPgd, None);
    trace.extend(rest.bytes());
    let got = flow(&trace, &image(&code), Errata::default());
    let want = [
        &at(0),
        "[paging, cr3: 0000000000cdcdc0]",
        "[vmcs, base: 00000000cdcdc000]",
        "[disabled]",
    ];
    assert_eq!(got, want.map(String::from));
}

#[test]
fn power_events_come_in_the_order_of_what_they_wait_for() {
    // Tracing off: MWAIT waits for its EXSTOP, PWRE for its PWRX.
    let code = [HLT];
    let mut trace = Encoder::new();
    trace.psb();
    trace.psbend();
    let mut trace = trace.into_bytes();
    trace.extend([0x02, 0xc2, 0x07, 0, 0, 0, 0x01, 0, 0, 0]); // MWAIT 7, 1
    trace.extend([0x02, 0x22, 0x00, 0x0f]); // PWRE C1.0
    trace.extend([0x02, 0x62]); // EXSTOP
    trace.extend([0x02, 0xa2, 0x0f, 0x01, 0, 0, 0]); // PWRX int: c1 (c0)
    let got = flow(&trace, &image(&code), Errata::default());
    let want = [
        "[mwait 7 1]",
        "[exstop]",
        "[pwre c1.0]",
        "[pwrx int: c1 (c0)]",
    ];
    assert_eq!(got[..4], want.map(String::from));
}

/// What the decoder prints, configured by `setup`, with event IPs when
/// `ips` (`weft pt flow --event-ips`).
fn flow_with(trace: &[u8], image: &Image, ips: bool, setup: fn(Flow) -> Flow) -> Vec<String> {
    let mut lines = Vec::new();
    setup(Flow::new(trace, image, Errata::default()))
        .run(&mut |step| lines.push(step.ptxed(ips).to_string()));
    lines
}

#[test]
fn a_ptwrite_naming_an_ip_while_tracing_is_off_takes_the_next_fups() {
    // PTW with IP (header 0x92: IP, 4-byte payload), then the FUP saying
    // where its PTWRITE ran (libipt's `ptw-fup`).
    let mut trace = Encoder::new();
    trace.psb();
    trace.psbend();
    let mut trace = trace.into_bytes();
    trace.extend([0x02, 0x92]);
    trace.extend(0xabcd_u32.to_le_bytes());
    let mut rest = Encoder::new();
    rest.ip(IpKind::Fup, Some(CODE));
    trace.extend(rest.bytes());
    let image = image(&[HLT]);
    let shown = flow_with(&trace, &image, true, |f| f);
    assert_eq!(shown, ["[ptwrite: abcd, ip: 0000000000001000]"]);
    assert_eq!(flow(&trace, &image, Errata::default()), ["[ptwrite: abcd]"]);
}

#[test]
fn an_exec_mode_is_reported_only_where_it_changes_what_is_known() {
    // MODE.Exec 64-bit, then TIP.PGE: reported where the PSB+ did not say
    // the mode already (libipt's `ptet-mode_exec-spurious`).
    let with_header = |header: bool| {
        let mut trace = Encoder::new();
        trace.psb();
        if header {
            trace.mode_64();
        }
        trace.psbend();
        trace.mode_64();
        trace.ip(IpKind::TipPge, Some(CODE));
        stop_at(&mut trace, CODE + 1);
        flow(trace.bytes(), &image(&[NOP, HLT]), Errata::default())
    };
    assert_eq!(with_header(true), ["[enabled]", &at(0), "[disabled]"]);
    assert_eq!(
        with_header(false),
        ["[enabled]", "[exec mode: 64-bit]", &at(0), "[disabled]"]
    );
}

#[test]
fn a_mode_exec_before_a_fup_happens_there_and_is_no_branch() {
    // nop; nop; hlt. MODE.Exec with IF set (event tracing after STI), then
    // a FUP at the second NOP: interrupts are enabled there, and nothing
    // branches (libipt's `ptet-mode_exec-if`).
    let mut trace = start_at(CODE).into_bytes();
    trace.extend([0x99, 0x05]);
    let mut rest = Encoder::new();
    rest.ip(IpKind::Fup, Some(CODE + 1));
    stop_at(&mut rest, CODE + 2);
    trace.extend(rest.bytes());
    let image = image(&[NOP, NOP, HLT]);
    assert_eq!(
        flow_with(&trace, &image, true, |f| f.with_iflags(true)),
        [
            &at(0),
            "[interrupts enabled, ip: 0000000000001001]",
            &at(1),
            "[disabled, at: 0000000000001002]"
        ]
    );
    assert_eq!(
        flow(&trace, &image, Errata::default()),
        [&at(0), &at(1), "[disabled]"]
    );
}

#[test]
fn a_transaction_commits_at_its_fup_without_branching() {
    // nop; nop; jmp rax. Begin at the second NOP, commit at the jump, which
    // then leaves with tracing off: a commit's FUP only says where it
    // happened, unlike an abort's (libipt's
    // `ptxed-resync-nomap-mode_tsx-tip_pgd`).
    let mut trace = start_at(CODE).into_bytes();
    trace.extend([0x99, 0x21]);
    let mut rest = Encoder::new();
    rest.ip(IpKind::Fup, Some(CODE + 1));
    trace.extend(rest.bytes());
    trace.extend([0x99, 0x20]);
    let mut rest = Encoder::new();
    rest.ip(IpKind::Fup, Some(CODE + 2));
    rest.ip(IpKind::TipPgd, None);
    trace.extend(rest.bytes());
    let got = flow(&trace, &image(&[NOP, NOP, 0xff, 0xe0]), Errata::default());
    assert_eq!(
        got,
        [
            &at(0),
            "[begin transaction]",
            &format!("? {}", at(1)),
            "[committed]",
            &at(2),
            "[disabled]"
        ]
    );
}

#[test]
fn resync_goes_on_at_the_next_tip_and_errors_are_named_past_a_tnt() {
    // jmp rax; jmp rax; hlt. The first jumps to 0x2000, where nothing is
    // mapped; a TNT the lost code used, then a TIP back to the second jump,
    // which goes to the HLT. Without resync the flow ends at the error; with
    // it, it goes on from that TIP (libipt's `ptxed-resync-nomap-*`).
    let code = [0xff, 0xe0, 0xff, 0xe0, HLT];
    let mut trace = start_at(CODE);
    trace.ip(IpKind::Tip, Some(0x2000));
    let tnt_at = trace.bytes().len() as u64;
    trace.tnt(&[true]);
    trace.ip(IpKind::Tip, Some(CODE + 2));
    trace.ip(IpKind::Tip, Some(CODE + 4));
    stop_at(&mut trace, CODE + 4);
    let error = format!(
        "[{:x}, 2000: error: no memory mapped at this address]",
        tnt_at + 1
    );
    let image = image(&code);
    assert_eq!(
        flow(trace.bytes(), &image, Errata::default()),
        [at(0), error.clone()]
    );
    assert_eq!(
        flow_with(trace.bytes(), &image, false, |f| f.with_resync(true)),
        [&at(0), error.as_str(), &at(2), "[disabled]"]
    );
}

#[test]
fn a_psb_contradicting_the_known_mode_is_a_bad_status_update() {
    // Tracing in 64-bit code; a PSB+ then says 32-bit (cs.d) while the walk
    // knew 64-bit: libipt stops with "bad status update".
    let mut trace = start_at(CODE);
    trace.psb();
    let mut trace = trace.into_bytes();
    let mode_at = trace.len() as u64;
    trace.extend([0x99, 0x02]);
    let mut rest = Encoder::new();
    rest.ip(IpKind::Fup, Some(CODE));
    rest.psbend();
    trace.extend(rest.bytes());
    let got = flow(&trace, &image(&[NOP, HLT]), Errata::default());
    assert_eq!(got, [format!("[{mode_at:x}, 0: error: bad status update]")]);
}

/// libipt's `pt_blk_tick`: with ticks asked for, a TNT or TIP that comes
/// at another time than the packet before it reports `[tick]` after the
/// branch it decides (a TNT once, at its first bit); one at the same time
/// reports none. Every event carries the time of its packet.
#[test]
fn ticks_mark_the_branches_where_time_moved() {
    // jz +0; jz +0; jmp rax; nop; hlt
    let code = [0x74, 0x00, 0x74, 0x00, 0xff, 0xe0, NOP, HLT];
    let mut trace = Encoder::new();
    trace.psb();
    trace.tsc(0x10);
    trace.mode_64();
    trace.ip(IpKind::Fup, Some(CODE));
    trace.psbend();
    trace.tnt(&[true]);
    trace.tsc(0x20);
    trace.tnt(&[false]);
    trace.tsc(0x30);
    trace.ip(IpKind::Tip, Some(CODE + 6));
    stop_at(&mut trace, CODE + 7);
    let image = image(&code);
    let mut lines = Vec::new();
    Flow::new(trace.bytes(), &image, Errata::default())
        .with_ticks(true)
        .run(&mut |step| lines.push(step.ptxed(false).with_times(true).to_string()));
    assert_eq!(
        lines,
        [
            at(0),
            at(2),
            "[0000000000000020  tick]".into(),
            at(4),
            "[0000000000000030  tick]".into(),
            at(6),
            "[0000000000000030  disabled]".into(),
        ]
    );
    // Without ticks, the same flow and times, no ticks.
    let mut plain = Vec::new();
    Flow::new(trace.bytes(), &image, Errata::default())
        .run(&mut |step| plain.push(step.ptxed(false).with_times(true).to_string()));
    let without: Vec<_> = lines.into_iter().filter(|l| !l.contains("tick")).collect();
    assert_eq!(plain, without);
}
