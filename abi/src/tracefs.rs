//! Tracepoint record layouts from tracefs `format` files, so that field
//! offsets come from the running kernel rather than from compile time.

/// Offset and size in bytes of one field of a tracepoint record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// Byte offset from the start of the record.
    pub offset: u32,
    /// Size in bytes.
    pub size: u32,
}

/// One field line of a tracefs `format` file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldLine<'a> {
    /// The field name, without any array suffix.
    pub name: &'a str,
    /// The C declaration as written (`const char * filename`,
    /// `__data_loc char[] name`, `char comm[16]`).
    pub declaration: &'a str,
    /// Where the field is.
    pub field: Field,
    /// Whether the kernel marks it signed.
    pub signed: bool,
}

/// The well-formed field lines of the text of a tracefs `format` file.
///
/// Field lines look like
/// `\tfield:long ret;\toffset:16;\tsize:8;\tsigned:1;`; the field name is the
/// last word of the declaration, without any array suffix.
pub fn fields(format: &str) -> impl Iterator<Item = FieldLine<'_>> {
    format.lines().filter_map(|line| {
        let mut parts = line.trim().split(';').map(str::trim);
        let declaration = parts.next()?.strip_prefix("field:")?;
        let name = declaration.split_whitespace().last()?.split('[').next()?;
        let value = |key: &str| {
            parts
                .clone()
                .find_map(|part| part.strip_prefix(key)?.parse::<u32>().ok())
        };
        Some(FieldLine {
            name,
            declaration,
            field: Field {
                offset: value("offset:")?,
                size: value("size:")?,
            },
            signed: value("signed:") == Some(1),
        })
    })
}

/// Finds field `name` in the text of a tracefs `format` file; `None` when it
/// is absent or its line is malformed.
#[must_use]
pub fn find_field(format: &str, name: &str) -> Option<Field> {
    fields(format).find(|f| f.name == name).map(|f| f.field)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SYS_EXIT_READ: &str = "name: sys_exit_read\nID: 731\nformat:\n\
        \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
        \tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;\n\
        \tfield:long ret;\toffset:16;\tsize:8;\tsigned:1;\n\n\
        print fmt: \"0x%lx\", REC->ret\n";

    #[test]
    fn find_field_sys_exit() {
        assert_eq!(
            find_field(SYS_EXIT_READ, "__syscall_nr"),
            Some(Field { offset: 8, size: 4 })
        );
        assert_eq!(
            find_field(SYS_EXIT_READ, "ret"),
            Some(Field {
                offset: 16,
                size: 8
            })
        );
    }

    #[test]
    fn find_field_missing_or_truncated() {
        assert_eq!(find_field(SYS_EXIT_READ, "nope"), None);
        assert_eq!(find_field("\tfield:long ret;\toffset:16", "ret"), None);
        assert_eq!(find_field("", "ret"), None);
    }

    #[test]
    fn find_field_array_suffix() {
        let text = "\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;";
        assert_eq!(
            find_field(text, "comm"),
            Some(Field {
                offset: 8,
                size: 16
            })
        );
    }
}
