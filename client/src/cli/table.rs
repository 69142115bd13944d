//! **Pure**: aligned text tables for human output, and the escaping that keeps
//! one record on one line.

use std::fmt::Write as _;

/// Columns are separated by this many spaces.
const COLUMN_GAP: usize = 2;

/// A table of text cells under a header row; every row has the header's width.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// An empty table with these column titles.
    pub(crate) fn new(header: &[&str]) -> Table {
        assert!(!header.is_empty(), "a table needs a column");
        Table {
            header: header.iter().map(|title| (*title).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; it must have one cell per column.
    pub(crate) fn row(&mut self, cells: Vec<String>) {
        assert_eq!(
            cells.len(),
            self.header.len(),
            "row {cells:?} does not match header {:?}",
            self.header
        );
        self.rows.push(cells);
    }

    /// The table as lines: columns left-aligned to their widest cell,
    /// separated by two spaces, no trailing spaces.
    pub(crate) fn render(&self) -> String {
        let mut widths: Vec<usize> = self.header.iter().map(|title| width(title)).collect();
        for row in &self.rows {
            for (column, cell) in row.iter().enumerate() {
                widths[column] = widths[column].max(width(cell));
            }
        }
        let mut out = String::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let mut line = String::new();
            for (column, cell) in row.iter().enumerate() {
                if column > 0 {
                    line.push_str(&" ".repeat(COLUMN_GAP));
                }
                line.push_str(cell);
                let last = column + 1 == row.len();
                if !last {
                    line.push_str(&" ".repeat(widths[column] - width(cell)));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// Display width of a cell (one column per character; cells are escaped).
fn width(cell: &str) -> usize {
    cell.chars().count()
}

/// Bytes as one line of text: UTF-8 kept (control characters and the
/// backslash escaped as `\n`, `\t`, `\\`, `\u{..}`), invalid bytes as `\xNN`.
pub(crate) fn escape_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for character in chunk.valid().chars() {
            match character {
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                control if control.is_control() => {
                    let _ = write!(out, "\\u{{{:x}}}", u32::from(control));
                }
                other => out.push(other),
            }
        }
        for byte in chunk.invalid() {
            let _ = write!(out, "\\x{byte:02x}");
        }
    }
    out
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

/// A byte count for humans: `512 B`, `1.5 KiB`, `3.0 MiB`.
pub(crate) fn bytes_human(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_to_the_widest_cell() {
        let mut table = Table::new(&["NODE", "ADDRESS", "STATE"]);
        table.row(vec!["1".into(), "127.0.0.1:7201".into(), "up".into()]);
        table.row(vec!["12".into(), "h:1".into(), "".into()]);
        assert_eq!(
            table.render(),
            "NODE  ADDRESS         STATE\n\
             1     127.0.0.1:7201  up\n\
             12    h:1\n"
        );
    }

    #[test]
    fn a_table_without_rows_is_its_header() {
        let table = Table::new(&["A", "B"]);
        assert_eq!(table.render(), "A  B\n");
    }

    #[test]
    fn wide_characters_count_once() {
        let mut table = Table::new(&["K", "V"]);
        table.row(vec!["é".into(), "x".into()]);
        assert_eq!(table.render(), "K  V\né  x\n");
    }

    #[test]
    #[should_panic(expected = "does not match header")]
    fn a_short_row_is_a_bug() {
        Table::new(&["A", "B"]).row(vec!["only".into()]);
    }

    #[test]
    fn escaping_keeps_a_record_on_one_line() {
        assert_eq!(escape_bytes(b"plain text"), "plain text");
        assert_eq!(escape_bytes(b"a\nb\tc\\"), "a\\nb\\tc\\\\");
        assert_eq!(escape_bytes(b"\x00\xff"), "\\u{0}\\xff");
        assert_eq!(escape_bytes("é".as_bytes()), "é");
        assert_eq!(hex(&[0, 0xab]), "00ab");
    }

    #[test]
    fn byte_counts_read_naturally() {
        assert_eq!(bytes_human(512), "512 B");
        assert_eq!(bytes_human(1536), "1.5 KiB");
        assert_eq!(bytes_human(3 * 1024 * 1024), "3.0 MiB");
    }
}
