//! The little binary codec operation bodies are written in.
//!
//! Fixed-width little-endian integers, length-prefixed byte strings and lists.
//! The reader checks every length against the bytes that are left before
//! allocating, so a lying length costs an error, never memory.

use bytes::BufMut;

use crate::error::BodyError;

/// Longest stream, topic or consumer name, in bytes.
pub const NAME_LENGTH_MAX: usize = 255;

/// A body that can be written and read back with this codec.
pub trait Body: Sized {
    /// Writes the body.
    fn encode(&self, writer: &mut BodyWriter);
    /// Reads the body; the caller checks that nothing is left over.
    fn decode(reader: &mut BodyReader<'_>) -> Result<Self, BodyError>;

    /// The body as bytes.
    fn to_vec(&self) -> Vec<u8> {
        let mut writer = BodyWriter::default();
        self.encode(&mut writer);
        writer.into_vec()
    }

    /// Reads a whole body: every byte must belong to it.
    fn from_bytes(bytes: &[u8]) -> Result<Self, BodyError> {
        let mut reader = BodyReader::new(bytes);
        let body = Self::decode(&mut reader)?;
        reader.finish()?;
        Ok(body)
    }
}

/// Writes fields into a growing buffer.
#[derive(Debug, Default)]
pub struct BodyWriter {
    bytes: Vec<u8>,
}

impl BodyWriter {
    /// The bytes written so far.
    pub fn into_vec(self) -> Vec<u8> {
        self.bytes
    }

    /// How many bytes were written so far (to pad a body to a size).
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// True before anything was written.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Writes one byte.
    pub fn u8(&mut self, value: u8) {
        self.bytes.put_u8(value);
    }

    /// Writes a little-endian `u16`.
    pub fn u16(&mut self, value: u16) {
        self.bytes.put_u16_le(value);
    }

    /// Writes a little-endian `u32`.
    pub fn u32(&mut self, value: u32) {
        self.bytes.put_u32_le(value);
    }

    /// Writes a little-endian `u64`.
    pub fn u64(&mut self, value: u64) {
        self.bytes.put_u64_le(value);
    }

    /// Writes a boolean as one byte (0 or 1).
    pub fn bool(&mut self, value: bool) {
        self.u8(u8::from(value));
    }

    /// Writes an optional `u64` as a presence byte and the value.
    pub fn option_u64(&mut self, value: Option<u64>) {
        self.bool(value.is_some());
        self.u64(value.unwrap_or(0));
    }

    /// Writes a `u128` (client and member ids), little-endian.
    pub fn u128(&mut self, value: u128) {
        self.bytes.put_u128_le(value);
    }

    /// Writes bytes with a `u32` length prefix.
    pub fn bytes(&mut self, value: &[u8]) {
        let length = u32::try_from(value.len()).expect("field shorter than 4 GiB");
        self.u32(length);
        self.bytes.put_slice(value);
    }

    /// Writes a string with a `u16` length prefix.
    pub fn str(&mut self, value: &str) {
        let length = u16::try_from(value.len()).expect("string shorter than 64 KiB");
        self.u16(length);
        self.bytes.put_slice(value.as_bytes());
    }

    /// Writes a list with a `u32` count prefix.
    pub fn list<T>(&mut self, items: &[T], mut write: impl FnMut(&mut BodyWriter, &T)) {
        let count = u32::try_from(items.len()).expect("list shorter than 4G items");
        self.u32(count);
        for item in items {
            write(self, item);
        }
    }
}

/// Reads fields from a byte slice, in order.
#[derive(Debug)]
pub struct BodyReader<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> BodyReader<'a> {
    /// A reader at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> BodyReader<'a> {
        BodyReader { bytes, position: 0 }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.position
    }

    /// Errors unless every byte has been read.
    pub fn finish(&self) -> Result<(), BodyError> {
        match self.remaining() {
            0 => Ok(()),
            count => Err(BodyError::TrailingBytes { count }),
        }
    }

    /// Takes the next `length` bytes.
    pub fn take(&mut self, length: usize, field: &'static str) -> Result<&'a [u8], BodyError> {
        if length > self.remaining() {
            return Err(BodyError::Truncated {
                at: self.position,
                field,
            });
        }
        let slice = &self.bytes[self.position..self.position + length];
        self.position += length;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], BodyError> {
        let slice = self.take(N, field)?;
        let mut array = [0u8; N];
        array.copy_from_slice(slice);
        Ok(array)
    }

    /// Reads one byte.
    pub fn u8(&mut self, field: &'static str) -> Result<u8, BodyError> {
        Ok(self.array::<1>(field)?[0])
    }

    /// Reads a little-endian `u16`.
    pub fn u16(&mut self, field: &'static str) -> Result<u16, BodyError> {
        Ok(u16::from_le_bytes(self.array(field)?))
    }

    /// Reads a little-endian `u32`.
    pub fn u32(&mut self, field: &'static str) -> Result<u32, BodyError> {
        Ok(u32::from_le_bytes(self.array(field)?))
    }

    /// Reads a little-endian `u64`.
    pub fn u64(&mut self, field: &'static str) -> Result<u64, BodyError> {
        Ok(u64::from_le_bytes(self.array(field)?))
    }

    /// Reads a little-endian `u128`.
    pub fn u128(&mut self, field: &'static str) -> Result<u128, BodyError> {
        Ok(u128::from_le_bytes(self.array(field)?))
    }

    /// Reads a boolean byte; anything but 0 or 1 is an error.
    pub fn bool(&mut self, field: &'static str) -> Result<bool, BodyError> {
        match self.u8(field)? {
            0 => Ok(false),
            1 => Ok(true),
            value => Err(BodyError::UnknownValue {
                field,
                value: u64::from(value),
            }),
        }
    }

    /// Reads an optional `u64` (presence byte, value; the value is 0 when absent).
    pub fn option_u64(&mut self, field: &'static str) -> Result<Option<u64>, BodyError> {
        let present = self.bool(field)?;
        let value = self.u64(field)?;
        match (present, value) {
            (true, value) => Ok(Some(value)),
            (false, 0) => Ok(None),
            (false, _) => Err(BodyError::ReservedNotZero { field }),
        }
    }

    /// Reads bytes with a `u32` length prefix.
    pub fn bytes(&mut self, field: &'static str) -> Result<&'a [u8], BodyError> {
        let length = self.u32(field)? as usize;
        self.take(length, field)
    }

    /// Reads a UTF-8 string with a `u16` length prefix.
    pub fn str(&mut self, field: &'static str) -> Result<&'a str, BodyError> {
        let length = usize::from(self.u16(field)?);
        let bytes = self.take(length, field)?;
        core::str::from_utf8(bytes).map_err(|_| BodyError::Utf8 { field })
    }

    /// Reads a stream, topic or consumer name and checks the naming rules.
    pub fn name(&mut self, field: &'static str) -> Result<String, BodyError> {
        let name = self.str(field)?;
        validate_name(field, name)?;
        Ok(name.to_owned())
    }

    /// Reads a list with a `u32` count prefix. Each item takes at least
    /// `item_size_min` bytes, which bounds the count before anything is allocated.
    pub fn list<T>(
        &mut self,
        field: &'static str,
        item_size_min: usize,
        mut read: impl FnMut(&mut BodyReader<'a>) -> Result<T, BodyError>,
    ) -> Result<Vec<T>, BodyError> {
        assert!(item_size_min >= 1, "list items take at least one byte");
        let count = self.u32(field)? as usize;
        if count > self.remaining() / item_size_min {
            return Err(BodyError::Truncated {
                at: self.position,
                field,
            });
        }
        let mut items = Vec::with_capacity(count);
        for _ in 0..count {
            items.push(read(self)?);
        }
        Ok(items)
    }
}

/// Checks a stream, topic or consumer name: 1 to [`NAME_LENGTH_MAX`] bytes of
/// ASCII letters, digits, `.`, `_` and `-`, not starting with `.`.
pub fn validate_name(field: &'static str, name: &str) -> Result<(), BodyError> {
    let bad = |reason| BodyError::BadName {
        field,
        name: name.to_owned(),
        reason,
    };
    if name.is_empty() {
        return Err(bad("empty"));
    }
    if name.len() > NAME_LENGTH_MAX {
        return Err(bad("longer than 255 bytes"));
    }
    if name.starts_with('.') {
        return Err(bad("starts with '.'"));
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if !name.chars().all(allowed) {
        return Err(bad(
            "only ASCII letters, digits, '.', '_' and '-' are allowed",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lying_list_count_is_an_error_not_an_allocation() {
        let mut writer = BodyWriter::default();
        writer.u32(u32::MAX);
        let bytes = writer.into_vec();
        let mut reader = BodyReader::new(&bytes);
        let result = reader.list("items", 8, |reader| reader.u64("item"));
        assert!(matches!(
            result,
            Err(BodyError::Truncated { field: "items", .. })
        ));
    }

    #[test]
    fn names_follow_the_rules() {
        assert!(validate_name("topic", "orders-2024.v1_eu").is_ok());
        assert!(validate_name("topic", "").is_err());
        assert!(validate_name("topic", ".hidden").is_err());
        assert!(validate_name("topic", "a/b").is_err());
        assert!(validate_name("topic", "naïve").is_err());
        assert!(validate_name("topic", &"x".repeat(256)).is_err());
        assert!(validate_name("topic", &"x".repeat(255)).is_ok());
    }

    #[test]
    fn bad_bool_and_option_are_errors() {
        assert!(BodyReader::new(&[2]).bool("flag").is_err());
        let mut bytes = vec![0u8];
        bytes.extend_from_slice(&7u64.to_le_bytes());
        assert!(matches!(
            BodyReader::new(&bytes).option_u64("value"),
            Err(BodyError::ReservedNotZero { .. })
        ));
    }

    #[test]
    fn trailing_bytes_are_an_error() {
        let mut reader = BodyReader::new(&[1, 2, 3]);
        assert_eq!(reader.u16("x"), Ok(0x0201));
        assert_eq!(reader.finish(), Err(BodyError::TrailingBytes { count: 1 }));
    }

    #[test]
    fn invalid_utf8_is_an_error() {
        let mut writer = BodyWriter::default();
        writer.u16(2);
        let mut bytes = writer.into_vec();
        bytes.extend_from_slice(&[0xff, 0xfe]);
        assert_eq!(
            BodyReader::new(&bytes).str("name"),
            Err(BodyError::Utf8 { field: "name" })
        );
    }
}
