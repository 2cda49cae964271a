//! A USDT probe site's arguments (`8@%rbp 8@%r12 -4@%eax`): where each one
//! is at the site, as fields of the probe's registers.

use crate::{
    kernel::{Field, FieldKind},
    registers,
};

/// The fields `arg0`, `arg1`, ... of a site whose arguments the
/// assembler described as `args`: `SIZE@OPERAND` each, the size negative
/// when signed. An argument weft cannot read is [`FieldKind::Unread`], an
/// error only where a program reads it.
pub(crate) fn fields(args: &str) -> Vec<Field> {
    args.split_whitespace()
        .enumerate()
        .map(|(i, arg)| {
            let name = format!("arg{i}");
            field(&name, arg).unwrap_or(Field {
                name,
                offset: 0,
                size: 8,
                signed: false,
                kind: FieldKind::Unread,
                pointee: None,
                element: None,
            })
        })
        .collect()
}

fn field(name: &str, arg: &str) -> Option<Field> {
    let (size, operand) = arg.split_once('@')?;
    let size: i8 = size.parse().ok()?;
    if ![1, 2, 4, 8].contains(&size.unsigned_abs()) {
        return None;
    }
    let (offset, kind) = if let Some(constant) = operand.strip_prefix('$') {
        (0, FieldKind::Const(sized(constant.parse().ok()?, size)))
    } else if let Some(register_name) = operand.strip_prefix('%') {
        (register(register_name)?, FieldKind::Int)
    } else {
        // `OFFSET(%REG)`: the memory at a register plus an offset.
        let (at, base) = operand.split_once("(%")?;
        let at = if at.is_empty() { 0 } else { at.parse().ok()? };
        (register(base.strip_suffix(')')?)?, FieldKind::Memory { at })
    };
    Some(Field {
        name: name.to_owned(),
        offset,
        size: u16::from(size.unsigned_abs()),
        signed: size < 0,
        kind,
        pointee: None,
        element: None,
    })
}

/// Constant `value` as an argument of `size` bytes holds it (negative:
/// signed): `4@$-16` is 4294967280, `-1@$255` is -1.
fn sized(value: i64, size: i8) -> i64 {
    let shift = 64 - 8 * u32::from(size.unsigned_abs());
    if size < 0 {
        value << shift >> shift
    } else {
        ((value.cast_unsigned() << shift) >> shift).cast_signed()
    }
}

/// The offset in `struct pt_regs` of x86-64 register `name` (`rax`,
/// `eax`, `ax`, `al`, `ah`, `r8d`, ...): of its low bytes, as x86-64 is
/// little-endian, or of byte 1 for `ah`, `bh`, `ch` and `dh`.
fn register(name: &str) -> Option<u16> {
    const LEGACY: [(&str, &str); 8] = [
        ("ax", "ax"),
        ("bx", "bx"),
        ("cx", "cx"),
        ("dx", "dx"),
        ("si", "si"),
        ("di", "di"),
        ("bp", "bp"),
        ("sp", "sp"),
    ];
    if let Some(n) = name.strip_prefix('r')
        && let Some(digits) = n.strip_suffix(['d', 'w', 'b']).or(Some(n))
        && digits.parse::<u8>().is_ok_and(|n| (8..=15).contains(&n))
    {
        return registers::offset(&format!("r{digits}"));
    }
    if name == "rip" {
        return registers::offset("ip");
    }
    let high = ["ah", "bh", "ch", "dh"].contains(&name);
    let core = match name.len() {
        3 if name.starts_with(['r', 'e']) => &name[1..],
        3 if name.ends_with('l') => &name[..2],
        2 if high || name.ends_with('l') => &name[..1],
        2 => name,
        _ => return None,
    };
    // `al`..`dl` name the same registers as `ax`..`dx`.
    let core = match core {
        "a" | "b" | "c" | "d" => format!("{core}x"),
        other => other.to_string(),
    };
    let (_, pt_name) = LEGACY.iter().find(|(n, _)| *n == core)?;
    Some(registers::offset(pt_name)? + u16::from(high))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_read_as_the_assembler_wrote_them() {
        let read = fields("8@%rbp 8@%r12 -4@%eax 1@%r9b -2@$-7 4@-24(%rbp) 1@%ah");
        let got: Vec<(&str, u16, u16, bool, FieldKind)> = read
            .iter()
            .map(|f| (f.name.as_str(), f.offset, f.size, f.signed, f.kind))
            .collect();
        assert_eq!(
            got,
            [
                ("arg0", 32, 8, false, FieldKind::Int),
                ("arg1", 24, 8, false, FieldKind::Int),
                ("arg2", 80, 4, true, FieldKind::Int),
                ("arg3", 64, 1, false, FieldKind::Int),
                ("arg4", 0, 2, true, FieldKind::Const(-7)),
                ("arg5", 32, 4, false, FieldKind::Memory { at: -24 }),
                ("arg6", 81, 1, false, FieldKind::Int),
            ]
        );
        for (reg, offset) in [
            ("rdi", 112),
            ("esi", 104),
            ("dl", 96),
            ("cx", 88),
            ("r15d", 0),
        ] {
            assert_eq!(register(reg), Some(offset), "{reg}");
        }
        assert_eq!(fields("8@(%rsp)")[0].kind, FieldKind::Memory { at: 0 });
        // A constant holds what its size keeps, as bpftrace reads it.
        let constants = fields("4@$-202182160 -4@$-202182160 2@$-3600 1@$-16 -1@$240 8@$-5");
        let constants: Vec<FieldKind> = constants.iter().map(|f| f.kind).collect();
        assert_eq!(
            constants,
            [4_092_785_136, -202_182_160, 61936, 240, -16, -5].map(FieldKind::Const)
        );
        for bad in [
            "3@%rax",
            "8@%xmm0",
            "8@foo(%rip)",
            "8@8(%rax,%rbx,8)",
            "8",
            "x@%rax",
        ] {
            assert_eq!(fields(bad)[0].kind, FieldKind::Unread, "{bad}");
        }
        assert_eq!(fields(""), []);
    }
}
