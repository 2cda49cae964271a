//! printf-style formats: which values a format wants, and the text it makes.

use std::fmt::Write as _;

use crate::value::{Type, Value};

/// One `%` conversion.
struct Spec {
    left: bool,
    zero: bool,
    plus: bool,
    width: usize,
    precision: Option<usize>,
    /// The bits of the integer C reads for it: bpftrace hands its 64-bit
    /// value to `snprintf(3)`, so `%d` prints the low 32 bits, `%hd` 16,
    /// `%hhd` 8, and `%ld`, `%lld`, `%jd`, `%zd`, `%td` all 64.
    bits: u32,
    conversion: char,
    /// After `%r`: `x` prints every byte as `\xNN`, `h` as hex pairs
    /// apart (`48 65`), as bpftrace's `%rx` and `%rh`.
    raw: Option<char>,
}

/// Splits a format into literal text and conversions.
fn pieces(format: &str) -> Result<Vec<Result<&str, Spec>>, String> {
    let mut out = Vec::new();
    let mut rest = format;
    while let Some(at) = rest.find('%') {
        if at > 0 {
            out.push(Ok(&rest[..at]));
        }
        let spec = &rest[at + 1..];
        if let Some(after) = spec.strip_prefix('%') {
            out.push(Ok("%"));
            rest = after;
            continue;
        }
        let mut chars = spec.char_indices().peekable();
        let (mut left, mut zero, mut plus) = (false, false, false);
        while let Some((_, c @ ('-' | '0' | '+' | ' ' | '#'))) = chars.peek().copied() {
            match c {
                '-' => left = true,
                '0' => zero = true,
                '+' => plus = true,
                _ => {}
            }
            chars.next();
        }
        let number = |chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>| {
            let mut n: Option<usize> = None;
            while let Some((_, d)) = chars.peek().copied().filter(|(_, d)| d.is_ascii_digit()) {
                n = Some(n.unwrap_or(0) * 10 + d.to_digit(10).expect("digit") as usize);
                chars.next();
            }
            n
        };
        let width = number(&mut chars).unwrap_or(0);
        let precision = if chars.peek().is_some_and(|(_, c)| *c == '.') {
            chars.next();
            Some(number(&mut chars).unwrap_or(0))
        } else {
            None
        };
        let mut length = String::new();
        while let Some((_, c @ ('h' | 'l' | 'z' | 'j' | 't'))) = chars.peek().copied() {
            length.push(c);
            chars.next();
        }
        let bits = match length.as_str() {
            "" => 32,
            "h" => 16,
            "hh" => 8,
            "l" | "ll" | "j" | "z" | "t" => 64,
            _ => return Err(format!("unknown length `{length}` in a `%` conversion")),
        };
        let Some((index, conversion)) = chars.next() else {
            return Err("the format ends inside a `%` conversion".into());
        };
        if !matches!(
            conversion,
            'd' | 'i' | 'u' | 'x' | 'X' | 'o' | 'c' | 's' | 'r' | 'p'
        ) {
            return Err(format!(
                "unknown conversion `%{conversion}`: weft knows %d %i %u %x %X %o %c %s %r %p and %%"
            ));
        }
        let mut end = index + conversion.len_utf8();
        let raw = spec[end..]
            .chars()
            .next()
            .filter(|c| conversion == 'r' && matches!(c, 'x' | 'h'));
        end += raw.map_or(0, char::len_utf8);
        out.push(Err(Spec {
            left,
            zero,
            plus,
            width,
            precision,
            bits,
            conversion,
            raw,
        }));
        rest = &spec[end..];
    }
    if !rest.is_empty() {
        out.push(Ok(rest));
    }
    Ok(out)
}

/// The type of value each conversion of `format` takes.
pub fn conversions(format: &str) -> Result<Vec<Type>, String> {
    Ok(pieces(format)?
        .into_iter()
        .filter_map(Result::err)
        .map(|spec| {
            // `%r` prints a `buf()`, whose bytes are escaped already.
            if matches!(spec.conversion, 's' | 'r') {
                Type::Str
            } else {
                Type::Int
            }
        })
        .collect())
}

/// The text `format` makes of `values` (checked beforehand).
pub fn render(format: &str, values: &[Value]) -> String {
    // bpftrace 0.17 formats only when there are arguments: without, the
    // text goes out as written (`printf("100%%\n")` prints `100%%`, and
    // `system` and `cat` take it so).
    if values.is_empty() {
        return format.to_owned();
    }
    let mut out = String::new();
    let mut values = values.iter();
    for piece in pieces(format).unwrap_or_default() {
        match piece {
            Ok(text) => out.push_str(text),
            Err(spec) => {
                let value = values.next().cloned().unwrap_or(Value::Int(0));
                out.push_str(&convert(&spec, &value));
            }
        }
    }
    out
}

fn convert(spec: &Spec, value: &Value) -> String {
    let body = match (spec.conversion, value) {
        (_, Value::Str(s)) => match spec.precision {
            Some(p) => s.chars().take(p).collect(),
            None => s.clone(),
        },
        ('r', Value::Buf(bytes)) if spec.raw.is_some() => raw_hex(bytes, spec.raw == Some('h')),
        // The checker passes no tuple to printf().
        (
            _,
            Value::Tuple(_) | Value::Bytes(_) | Value::Buf(_) | Value::Array(_) | Value::Record(_),
        ) => value.to_string(),
        // As glibc prints a null pointer.
        ('p', Value::Int(0)) => "(nil)".into(),
        ('p', Value::Int(n)) => format!("0x{:x}", *n as u64),
        // C passes an int and prints its low byte.
        ('c', Value::Int(n)) => char::from(*n as u8).to_string(),
        (conversion, Value::Int(n)) => {
            let shift = 64 - spec.bits;
            let signed = (n << shift) >> shift;
            let unsigned = (*n as u64) << shift >> shift;
            match conversion {
                'd' | 'i' if spec.plus && signed >= 0 => format!("+{signed}"),
                'd' | 'i' => signed.to_string(),
                'x' => format!("{unsigned:x}"),
                'X' => format!("{unsigned:X}"),
                'o' => format!("{unsigned:o}"),
                _ => unsigned.to_string(),
            }
        }
    };
    let len = body.chars().count();
    if len >= spec.width {
        return body;
    }
    let pad = spec.width - len;
    if spec.left {
        format!("{body}{}", " ".repeat(pad))
    } else if spec.zero && !matches!(spec.conversion, 's' | 'r') {
        let (sign, digits) = match body.strip_prefix('-') {
            Some(d) => ("-", d),
            None => ("", body.as_str()),
        };
        format!("{sign}{}{digits}", "0".repeat(pad))
    } else {
        format!("{}{body}", " ".repeat(pad))
    }
}

/// Bytes as bpftrace's `%r` prints a `buf()`: printable ASCII as it is,
/// any other byte as `\xNN`.
pub fn escaped(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        if b == b' ' || b.is_ascii_graphic() {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

/// Bytes as `%rx` prints them (`\x48\x65`) or `%rh` (`48 65`).
fn raw_hex(bytes: &[u8], spaced: bool) -> String {
    let hex = bytes.iter().map(|b| {
        if spaced {
            format!("{b:02x}")
        } else {
            format!("\\x{b:02x}")
        }
    });
    hex.collect::<Vec<_>>().join(if spaced { " " } else { "" })
}

/// A MAC address as bpftrace's `macaddr()` prints it: six bytes in upper
/// case hex, `:` between them.
pub fn mac(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The bytes of the IPv4 or IPv6 address `text` writes (`10.0.0.1`,
/// `fe80::1`), as `inet_pton` gives them and bpftrace's `pton()` does.
pub fn address_bytes(text: &str) -> Option<Vec<u8>> {
    if let Ok(v4) = text.parse::<std::net::Ipv4Addr>() {
        return Some(v4.octets().to_vec());
    }
    text.parse::<std::net::Ipv6Addr>()
        .ok()
        .map(|v6| v6.octets().to_vec())
}

/// An IPv4 (4 bytes) or IPv6 (16 bytes) address in network order, as
/// `inet_ntop(3)` writes it, which bpftrace's `ntop()` prints.
pub fn inet(bytes: &[u8]) -> String {
    if let Ok(v4) = <[u8; 4]>::try_from(bytes) {
        return std::net::Ipv4Addr::from(v4).to_string();
    }
    let Ok(v6) = <[u8; 16]>::try_from(bytes) else {
        return String::new();
    };
    let address = std::net::Ipv6Addr::from(v6);
    // glibc writes `::a.b.c.d` for an IPv4-compatible address too (six
    // zero words, then a non-zero seventh), where Rust writes hex.
    let words = address.segments();
    if words[..6] == [0; 6] && words[6] != 0 {
        return format!(
            "::{}",
            std::net::Ipv4Addr::new(v6[12], v6[13], v6[14], v6[15])
        );
    }
    address.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_as_bpftrace_escapes_them() {
        assert_eq!(escaped(b"GET / \0\x7f\n~"), "GET / \\x00\\x7f\\x0a~");
    }

    /// As glibc's `inet_ntop(3)` writes them.
    #[test]
    fn addresses_as_inet_ntop_writes_them() {
        let v6 = |text: &str| text.parse::<std::net::Ipv6Addr>().unwrap().octets();
        assert_eq!(inet(&[127, 0, 0, 1]), "127.0.0.1");
        assert_eq!(inet(&v6("::1")), "::1");
        assert_eq!(inet(&v6("::")), "::");
        assert_eq!(inet(&v6("::ffff:10.0.0.1")), "::ffff:10.0.0.1");
        assert_eq!(inet(&v6("::10.0.0.1")), "::10.0.0.1");
        assert_eq!(inet(&v6("fe80::1:0:0:2")), "fe80::1:0:0:2");
        assert_eq!(inet(&v6("2001:db8:0:0:1:0:0:1")), "2001:db8::1:0:0:1");
        assert_eq!(inet(&[1, 2, 3]), "");
    }

    #[test]
    fn mac_addresses_as_bpftrace_prints_them() {
        assert_eq!(mac(&[0x52, 0x54, 0, 0x12, 0xab, 0xff]), "52:54:00:12:AB:FF");
    }

    #[test]
    fn a_format_without_arguments_is_the_text_as_written() {
        assert_eq!(render("100%%\n", &[]), "100%%\n");
        assert_eq!(render("100%% %d\n", &[Value::Int(5)]), "100% 5\n");
    }

    #[test]
    fn conversions_and_rendering() {
        let format = "hi %d %s|%-5s|%5d|%x|%05d|%lu|%%|%c\n";
        assert_eq!(
            conversions(format).unwrap(),
            vec![
                Type::Int,
                Type::Str,
                Type::Str,
                Type::Int,
                Type::Int,
                Type::Int,
                Type::Int,
                Type::Int
            ]
        );
        let values = [
            Value::Int(42),
            Value::Str("s".into()),
            Value::Str("ab".into()),
            Value::Int(7),
            Value::Int(255),
            Value::Int(-42),
            Value::Int(-1),
            Value::Int(65),
        ];
        assert_eq!(
            render(format, &values),
            "hi 42 s|ab   |    7|ff|-0042|18446744073709551615|%|A\n"
        );
    }

    /// bpftrace hands each value to snprintf(3) as a 64-bit integer, which
    /// reads as wide an integer as the conversion's length says.
    #[test]
    fn integers_are_as_wide_as_their_length_says() {
        let big = Value::Int(5_000_000_000);
        let minus = Value::Int(-1);
        let format = "%d %ld %lld %u %lu %x %lx %hd %hhd %hu %zd %jx %c %p %p\n";
        let values = [
            big.clone(),
            big.clone(),
            Value::Int(-5_000_000_000),
            minus.clone(),
            minus.clone(),
            minus.clone(),
            minus.clone(),
            Value::Int(70_000),
            Value::Int(300),
            minus.clone(),
            big.clone(),
            minus,
            Value::Int(65_601),
            Value::Int(0),
            Value::Int(4096),
        ];
        assert_eq!(
            render(format, &values),
            "705032704 5000000000 -5000000000 4294967295 18446744073709551615 ffffffff \
             ffffffffffffffff 4464 44 65535 5000000000 ffffffffffffffff A (nil) 0x1000\n"
        );
        assert!(conversions("%lhd").unwrap_err().contains("length `lh`"));
    }

    #[test]
    fn bad_conversion() {
        assert!(conversions("%q").unwrap_err().contains("`%q`"));
        assert!(conversions("abc %").is_err());
    }
}
