//! Kafka's primitive encodings, in both forms: the classic one (fixed-width
//! lengths) and the flexible one (unsigned varint lengths plus one, tagged
//! fields) that each API switches to at some version.
//!
//! [`Reader`] never allocates on a count it has not seen backed by bytes:
//! every element of an array, a string or a byte string takes at least one
//! byte on the wire, so a count larger than what is left is refused before
//! anything is reserved. A few bytes cannot make the node reserve gigabytes.

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::DecodeError;

/// Elements reserved up front for an array, at most; the rest grow as they
/// decode.
const ARRAY_RESERVE_MAX: usize = 256;

/// Reads Kafka primitives from one request body, within its bytes.
#[derive(Debug, Clone)]
pub struct Reader {
    bytes: Bytes,
    flexible: bool,
}

impl Reader {
    /// A reader over `bytes`; `flexible` is whether the message's version
    /// uses the flexible encoding.
    pub fn new(bytes: Bytes, flexible: bool) -> Reader {
        Reader { bytes, flexible }
    }

    /// Whether lengths are varints and structures end in tagged fields.
    pub fn flexible(&self) -> bool {
        self.flexible
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.bytes.len()
    }

    fn take(&mut self, count: usize, field: &'static str) -> Result<Bytes, DecodeError> {
        if count > self.bytes.len() {
            return Err(DecodeError::Truncated { field });
        }
        Ok(self.bytes.split_to(count))
    }

    fn fixed<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], DecodeError> {
        let bytes = self.take(N, field)?;
        let mut out = [0u8; N];
        out.copy_from_slice(&bytes);
        Ok(out)
    }

    /// An `INT8`.
    pub fn i8(&mut self, field: &'static str) -> Result<i8, DecodeError> {
        Ok(i8::from_be_bytes(self.fixed(field)?))
    }

    /// A `BOOLEAN`.
    pub fn bool(&mut self, field: &'static str) -> Result<bool, DecodeError> {
        Ok(self.i8(field)? != 0)
    }

    /// An `INT16`.
    pub fn i16(&mut self, field: &'static str) -> Result<i16, DecodeError> {
        Ok(i16::from_be_bytes(self.fixed(field)?))
    }

    /// An `INT32`.
    pub fn i32(&mut self, field: &'static str) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.fixed(field)?))
    }

    /// An `INT64`.
    pub fn i64(&mut self, field: &'static str) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.fixed(field)?))
    }

    /// A `UUID`.
    pub fn uuid(&mut self, field: &'static str) -> Result<[u8; 16], DecodeError> {
        self.fixed(field)
    }

    /// An `UNSIGNED_VARINT` (at most five bytes).
    pub fn uvarint(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        let mut value: u32 = 0;
        for index in 0..5 {
            let [byte] = self.fixed::<1>(field)?;
            if index == 4 && byte > 0x0f {
                return Err(DecodeError::invalid(field, "varint longer than 32 bits"));
            }
            value |= u32::from(byte & 0x7f) << (7 * index);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError::invalid(field, "varint longer than 32 bits"))
    }

    /// An unsigned varint of up to 64 bits.
    fn uvarlong(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        let mut value: u64 = 0;
        for index in 0..10 {
            let [byte] = self.fixed::<1>(field)?;
            if index == 9 && byte > 0x01 {
                return Err(DecodeError::invalid(field, "varlong longer than 64 bits"));
            }
            value |= u64::from(byte & 0x7f) << (7 * index);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError::invalid(field, "varlong longer than 64 bits"))
    }

    /// A `VARINT` (zigzag).
    pub fn varint(&mut self, field: &'static str) -> Result<i32, DecodeError> {
        let raw = self.uvarint(field)?;
        Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }

    /// A `VARLONG` (zigzag).
    pub fn varlong(&mut self, field: &'static str) -> Result<i64, DecodeError> {
        let raw = self.uvarlong(field)?;
        Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }

    /// The length of a nullable string, byte string or array in this
    /// encoding (`None`: null), checked against the bytes left.
    fn length(
        &mut self,
        field: &'static str,
        classic_i16: bool,
    ) -> Result<Option<usize>, DecodeError> {
        let length: i64 = match (self.flexible, classic_i16) {
            (true, _) => i64::from(self.uvarint(field)?) - 1,
            (false, true) => i64::from(self.i16(field)?),
            (false, false) => i64::from(self.i32(field)?),
        };
        match length {
            -1 => Ok(None),
            length if length < 0 => Err(DecodeError::invalid(field, "negative length")),
            length if length as u64 > self.bytes.len() as u64 => {
                Err(DecodeError::Truncated { field })
            }
            length => Ok(Some(length as usize)),
        }
    }

    /// A `NULLABLE_STRING` (or `COMPACT_NULLABLE_STRING`).
    pub fn nullable_string(&mut self, field: &'static str) -> Result<Option<String>, DecodeError> {
        let Some(length) = self.length(field, true)? else {
            return Ok(None);
        };
        let bytes = self.take(length, field)?;
        let text =
            std::str::from_utf8(&bytes).map_err(|_| DecodeError::invalid(field, "not UTF-8"))?;
        Ok(Some(text.to_owned()))
    }

    /// A `STRING` (or `COMPACT_STRING`): null is refused.
    pub fn string(&mut self, field: &'static str) -> Result<String, DecodeError> {
        self.nullable_string(field)?
            .ok_or(DecodeError::invalid(field, "null"))
    }

    /// `NULLABLE_BYTES` (or `COMPACT_NULLABLE_BYTES`, or `RECORDS`).
    pub fn nullable_bytes(&mut self, field: &'static str) -> Result<Option<Bytes>, DecodeError> {
        match self.length(field, false)? {
            None => Ok(None),
            Some(length) => self.take(length, field).map(Some),
        }
    }

    /// `BYTES` (or `COMPACT_BYTES`): null reads as empty.
    pub fn bytes(&mut self, field: &'static str) -> Result<Bytes, DecodeError> {
        Ok(self.nullable_bytes(field)?.unwrap_or_default())
    }

    /// A nullable array, each element read by `element`.
    pub fn nullable_array<T>(
        &mut self,
        field: &'static str,
        mut element: impl FnMut(&mut Reader) -> Result<T, DecodeError>,
    ) -> Result<Option<Vec<T>>, DecodeError> {
        let Some(count) = self.length(field, false)? else {
            return Ok(None);
        };
        let mut items = Vec::with_capacity(count.min(ARRAY_RESERVE_MAX));
        for _ in 0..count {
            items.push(element(self)?);
        }
        Ok(Some(items))
    }

    /// An array (null reads as empty).
    pub fn array<T>(
        &mut self,
        field: &'static str,
        element: impl FnMut(&mut Reader) -> Result<T, DecodeError>,
    ) -> Result<Vec<T>, DecodeError> {
        Ok(self.nullable_array(field, element)?.unwrap_or_default())
    }

    /// The tagged fields that end a structure in the flexible encoding:
    /// skipped (none of those this node reads matter to it). Nothing in
    /// the classic encoding.
    pub fn tagged_fields(&mut self) -> Result<(), DecodeError> {
        if !self.flexible {
            return Ok(());
        }
        let count = self.uvarint("tagged field count")?;
        if count as usize > self.bytes.len() {
            return Err(DecodeError::Truncated {
                field: "tagged fields",
            });
        }
        for _ in 0..count {
            self.uvarint("tag")?;
            let size = self.uvarint("tagged field size")? as usize;
            self.take(size, "tagged field")?;
        }
        Ok(())
    }

    /// The rest of the bytes (a request that ends in a field not read).
    pub fn rest(self) -> Bytes {
        self.bytes
    }
}

/// `value`, cut to the most bytes a classic string holds, at a character
/// boundary.
fn within_classic_string(value: &str) -> &str {
    let max = i16::MAX as usize;
    if value.len() <= max {
        return value;
    }
    let mut end = max;
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    &value[..end]
}

/// Writes Kafka primitives into one response body.
#[derive(Debug)]
pub struct Writer {
    out: BytesMut,
    flexible: bool,
}

impl Writer {
    /// A writer for a message whose version is flexible or not.
    pub fn new(flexible: bool) -> Writer {
        Writer {
            out: BytesMut::with_capacity(256),
            flexible,
        }
    }

    /// Whether lengths are varints and structures end in tagged fields.
    pub fn flexible(&self) -> bool {
        self.flexible
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.out.len()
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }

    /// The written bytes.
    pub fn finish(self) -> BytesMut {
        self.out
    }

    /// An `INT8`.
    pub fn i8(&mut self, value: i8) {
        self.out.put_i8(value);
    }

    /// A `BOOLEAN`.
    pub fn bool(&mut self, value: bool) {
        self.out.put_i8(i8::from(value));
    }

    /// An `INT16`.
    pub fn i16(&mut self, value: i16) {
        self.out.put_i16(value);
    }

    /// An `INT32`.
    pub fn i32(&mut self, value: i32) {
        self.out.put_i32(value);
    }

    /// An `INT64`.
    pub fn i64(&mut self, value: i64) {
        self.out.put_i64(value);
    }

    /// A `UUID`.
    pub fn uuid(&mut self, value: [u8; 16]) {
        self.out.put_slice(&value);
    }

    /// An `UNSIGNED_VARINT`.
    pub fn uvarint(&mut self, mut value: u32) {
        while value >= 0x80 {
            self.out.put_u8((value as u8) | 0x80);
            value >>= 7;
        }
        self.out.put_u8(value as u8);
    }

    fn uvarlong(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.out.put_u8((value as u8) | 0x80);
            value >>= 7;
        }
        self.out.put_u8(value as u8);
    }

    /// A `VARINT` (zigzag).
    pub fn varint(&mut self, value: i32) {
        self.uvarint(((value << 1) ^ (value >> 31)) as u32);
    }

    /// A `VARLONG` (zigzag).
    pub fn varlong(&mut self, value: i64) {
        self.uvarlong(((value << 1) ^ (value >> 63)) as u64);
    }

    /// A length in this encoding (`None`: null); `classic_i16` for strings.
    fn length(&mut self, length: Option<usize>, classic_i16: bool) {
        match (self.flexible, length) {
            (true, None) => self.uvarint(0),
            (true, Some(length)) => {
                let length = u32::try_from(length).expect("a field shorter than 4 GiB");
                self.uvarint(length + 1);
            }
            (false, None) if classic_i16 => self.i16(-1),
            (false, None) => self.i32(-1),
            (false, Some(length)) if classic_i16 => {
                assert!(
                    length <= i16::MAX as usize,
                    "strings are cut to fit (`string`)"
                );
                self.i16(length as i16);
            }
            (false, Some(length)) => {
                self.i32(i32::try_from(length).expect("a field shorter than 2 GiB"));
            }
        }
    }

    /// A `STRING`. In the classic encoding a string holds at most
    /// [`i16::MAX`] bytes: a longer one (a name a client sent in a
    /// flexible request, echoed in a classic response) is cut at the last
    /// character boundary within it, never a panic.
    pub fn string(&mut self, value: &str) {
        let value = match self.flexible {
            true => value,
            false => within_classic_string(value),
        };
        self.length(Some(value.len()), true);
        self.out.put_slice(value.as_bytes());
    }

    /// A `NULLABLE_STRING`.
    pub fn nullable_string(&mut self, value: Option<&str>) {
        match value {
            Some(value) => self.string(value),
            None => self.length(None, true),
        }
    }

    /// `BYTES`.
    pub fn bytes(&mut self, value: &[u8]) {
        self.length(Some(value.len()), false);
        self.out.put_slice(value);
    }

    /// `NULLABLE_BYTES`.
    pub fn nullable_bytes(&mut self, value: Option<&[u8]>) {
        match value {
            Some(value) => self.bytes(value),
            None => self.length(None, false),
        }
    }

    /// An array of `items`, each written by `element`.
    pub fn array<T>(&mut self, items: &[T], mut element: impl FnMut(&mut Writer, &T)) {
        self.length(Some(items.len()), false);
        for item in items {
            element(self, item);
        }
    }

    /// A null array.
    pub fn null_array(&mut self) {
        self.length(None, false);
    }

    /// No tagged fields (flexible encoding only).
    pub fn tagged_fields(&mut self) {
        if self.flexible {
            self.uvarint(0);
        }
    }

    /// Raw bytes, as they are.
    pub fn raw(&mut self, bytes: &[u8]) {
        self.out.put_slice(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(bytes: &[u8], flexible: bool) -> Reader {
        Reader::new(Bytes::copy_from_slice(bytes), flexible)
    }

    #[test]
    fn varints_round_trip_at_their_edges() {
        for value in [0, 1, -1, 63, -64, 64, i32::MAX, i32::MIN] {
            let mut writer = Writer::new(true);
            writer.varint(value);
            let bytes = writer.finish();
            assert_eq!(reader(&bytes, true).varint("v"), Ok(value));
        }
        for value in [0i64, -1, i64::MAX, i64::MIN, 1 << 40] {
            let mut writer = Writer::new(true);
            writer.varlong(value);
            let bytes = writer.finish();
            assert_eq!(reader(&bytes, true).varlong("v"), Ok(value));
        }
    }

    #[test]
    fn a_huge_array_count_on_a_few_bytes_is_refused_before_any_reservation() {
        // Classic: INT32 count of 2^31 - 1 with three bytes behind it.
        let mut bytes = i32::MAX.to_be_bytes().to_vec();
        bytes.extend_from_slice(&[1, 2, 3]);
        let result = reader(&bytes, false).array("topics", |r| r.i64("x"));
        assert_eq!(result, Err(DecodeError::Truncated { field: "topics" }));
        // Flexible: varint count.
        let result =
            reader(&[0xff, 0xff, 0xff, 0xff, 0x07, 0], true).array("topics", |r| r.i8("x"));
        assert_eq!(result, Err(DecodeError::Truncated { field: "topics" }));
    }

    #[test]
    fn strings_and_nulls_in_both_encodings() {
        for flexible in [false, true] {
            let mut writer = Writer::new(flexible);
            writer.string("orders");
            writer.nullable_string(None);
            writer.nullable_bytes(None);
            writer.bytes(b"v");
            writer.tagged_fields();
            let mut read = Reader::new(writer.finish().freeze(), flexible);
            assert_eq!(read.string("a").as_deref(), Ok("orders"));
            assert_eq!(read.nullable_string("b"), Ok(None));
            assert_eq!(read.nullable_bytes("c"), Ok(None));
            assert_eq!(read.bytes("d"), Ok(Bytes::from_static(b"v")));
            assert_eq!(read.tagged_fields(), Ok(()));
            assert_eq!(read.remaining(), 0);
        }
    }

    #[test]
    fn a_string_too_long_for_the_classic_encoding_is_cut_not_a_panic() {
        let long = "é".repeat(20_000);
        let mut writer = Writer::new(false);
        writer.string(&long);
        let mut read = Reader::new(writer.finish().freeze(), false);
        let text = read.string("s").expect("a whole string");
        assert_eq!(text.len(), 32_766, "cut at a character boundary");
        let mut writer = Writer::new(true);
        writer.string(&long);
        let mut read = Reader::new(writer.finish().freeze(), true);
        assert_eq!(read.string("s").expect("whole").len(), 40_000);
    }

    #[test]
    fn an_overlong_varint_is_an_error() {
        let result = reader(&[0xff; 6], true).uvarint("v");
        assert!(matches!(result, Err(DecodeError::Invalid { .. })));
        assert_eq!(
            reader(&[0x80], true).uvarint("v"),
            Err(DecodeError::Truncated { field: "v" })
        );
    }
}
