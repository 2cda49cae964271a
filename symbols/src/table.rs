//! A table of function symbols, looked up by address or by name.

/// A function: where it starts, how long it is (0: unknown, it reaches the
/// next one), and its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    pub addr: u64,
    pub size: u64,
    pub name: String,
}

/// Functions by address.
#[derive(Debug, Default, Clone)]
pub struct Symbols {
    sorted: Vec<Symbol>,
}

impl Symbols {
    /// Adds functions; one name per address is kept (aliases, and both
    /// symbol tables, name some twice; the first added wins).
    pub fn extend(&mut self, symbols: impl IntoIterator<Item = Symbol>) {
        self.sorted.extend(symbols);
        // Stable: of equal addresses the first added stays first.
        self.sorted.sort_by_key(|s| s.addr);
        self.sorted.dedup_by_key(|s| s.addr);
    }

    /// The function holding `ip`, and how far into it `ip` is. A symbol
    /// without a size is taken to reach the next one.
    pub fn at(&self, ip: u64) -> Option<(&str, u64)> {
        let next = self.sorted.partition_point(|s| s.addr <= ip);
        let symbol = self.sorted[..next].last()?;
        let offset = ip - symbol.addr;
        let inside = offset < symbol.size
            || (symbol.size == 0 && self.sorted.get(next).is_none_or(|n| ip < n.addr));
        inside.then_some((symbol.name.as_str(), offset))
    }

    /// The function called `name` (as stored or demangled).
    pub fn named(&self, name: &str) -> Option<&Symbol> {
        self.sorted.iter().find(|s| s.name == name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Symbol> {
        self.sorted.iter()
    }

    pub fn len(&self) -> usize {
        self.sorted.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn symbol(addr: u64, size: u64, name: &str) -> Symbol {
        Symbol {
            addr,
            size,
            name: name.into(),
        }
    }

    #[test]
    fn an_address_is_inside_its_function_or_nowhere() {
        let mut symbols = Symbols::default();
        symbols.extend([symbol(0x100, 0x10, "a"), symbol(0x200, 0, "b")]);
        symbols.extend([symbol(0x100, 0x20, "alias"), symbol(0x300, 0, "c")]);
        assert_eq!(symbols.at(0x105), Some(("a", 5)));
        assert_eq!(symbols.at(0x110), None, "past a's size");
        assert_eq!(symbols.at(0x2ff), Some(("b", 0xff)), "sizeless: up to c");
        assert_eq!(symbols.at(0xfff), Some(("c", 0xcff)));
        assert_eq!(symbols.at(0x50), None);
        assert_eq!(symbols.len(), 3);
        assert_eq!(symbols.named("c").map(|s| s.addr), Some(0x300));
    }
}
