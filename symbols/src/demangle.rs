//! Mangled names made readable: Rust (v0 `_R…` and legacy `_ZN…17h…E`)
//! and C++ (Itanium `_Z…`). Anything else is returned as it is.

use std::borrow::Cow;

/// The readable form of `name`: Rust paths without their hash, C++ names
/// with their parameter types.
pub fn demangle(name: &str) -> Cow<'_, str> {
    if let Ok(rust) = rustc_demangle::try_demangle(name) {
        // `{:#}` leaves out the legacy hash and v0's crate disambiguators.
        return Cow::Owned(format!("{rust:#}"));
    }
    if name.starts_with("_Z")
        && let Ok(symbol) = cpp_demangle::Symbol::new(name)
        && let Ok(text) = symbol.demangle(&cpp_demangle::DemangleOptions::default())
    {
        return Cow::Owned(text);
    }
    Cow::Borrowed(name)
}

#[cfg(test)]
mod tests {
    use super::demangle;

    #[test]
    fn rust_cpp_and_plain_names() {
        assert_eq!(
            demangle("_ZN4core3fmt9Formatter3pad17h1234567890abcdefE"),
            "core::fmt::Formatter::pad"
        );
        assert_eq!(demangle("_RNvCs1234_7mycrate4main"), "mycrate::main");
        assert_eq!(demangle("_ZN3foo3barEv"), "foo::bar()");
        assert_eq!(demangle("_ZNK5shape4areaEi"), "shape::area(int) const");
        assert_eq!(demangle("main"), "main");
        assert_eq!(demangle("_Zbogus"), "_Zbogus");
    }
}
