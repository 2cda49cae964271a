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
