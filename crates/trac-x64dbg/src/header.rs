//! The file prefix and the JSON header (`specs/notes/x64dbg-notes.md` section 2).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use trace_core::{Cursor, LimitExceeded, Offset};

use crate::Error;
use crate::limits;
use crate::raw::{self, FilePrefix};

/// The traced architecture, from the header's `arch`: it sets the word size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arch {
    /// `"x64"`: `.trace64`, 8-byte words, 172-word REGDUMP.
    X64,
    /// `"x86"`: `.trace32`, 4-byte words, 216-word REGDUMP.
    X86,
}

impl Arch {
    /// The size of a word ("duint") in bytes: 8 or 4.
    #[must_use]
    pub const fn word_size(self) -> usize {
        match self {
            Arch::X64 => 8,
            Arch::X86 => 4,
        }
    }

    /// The number of words in the stored REGDUMP: 172 or 216 (a full dump has this many
    /// register changes).
    #[must_use]
    pub const fn regdump_words(self) -> u16 {
        match self {
            Arch::X64 => raw::X64_REGDUMP_WORDS,
            Arch::X86 => raw::X86_REGDUMP_WORDS,
        }
    }

    /// The header's spelling: `"x64"` or `"x86"`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Arch::X64 => "x64",
            Arch::X86 => "x86",
        }
    }

    /// The largest value a word holds.
    #[must_use]
    pub const fn word_max(self) -> u64 {
        match self {
            Arch::X64 => u64::MAX,
            Arch::X86 => u32::MAX as u64,
        }
    }
}

impl core::fmt::Display for Arch {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// The JSON header. x64dbg writes the keys in the order of the fields here; keys it does not
/// know are kept in [`Header::extra`] (written after the known ones, sorted by name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// `arch`: sets the word size.
    pub arch: Arch,
    /// `hashAlgorithm`, `"murmurhash"` from x64dbg.
    pub hash_algorithm: Option<String>,
    /// `hash`: `"0x…"` uppercase hex of the main module's hash, `"0x0"` when unknown.
    pub hash: Option<String>,
    /// `compression`: always `""` (no compressed variant exists).
    pub compression: Option<String>,
    /// `path`: the main module's path.
    pub path: Option<String>,
    /// Every other key, with its value.
    pub extra: Map<String, Value>,
}

/// The keys as deserialised; `ver` and `arch` are checked by hand for clear errors.
#[derive(Deserialize)]
struct RawHeader {
    ver: Option<Value>,
    arch: Option<Value>,
    #[serde(rename = "hashAlgorithm")]
    hash_algorithm: Option<String>,
    hash: Option<String>,
    compression: Option<String>,
    path: Option<String>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

impl Header {
    /// A header as x64dbg writes it for `arch`: murmurhash, hash `"0x0"`, no compression,
    /// the given module path.
    #[must_use]
    pub fn new(arch: Arch, path: &str) -> Header {
        Header {
            arch,
            hash_algorithm: Some("murmurhash".into()),
            hash: Some("0x0".into()),
            compression: Some(String::new()),
            path: Some(path.into()),
            extra: Map::new(),
        }
    }

    /// The `hash` value as a number, when it is `0x…` hex.
    #[must_use]
    pub fn hash_value(&self) -> Option<u64> {
        let h = self.hash.as_deref()?;
        let digits = h.strip_prefix("0x").or_else(|| h.strip_prefix("0X"))?;
        u64::from_str_radix(digits, 16).ok()
    }

    /// Parses the file prefix and the JSON header from the start of a file. Returns the
    /// header and the length of prefix plus JSON (the offset of the first block).
    ///
    /// # Errors
    ///
    /// Bad magic; a header length above [`limits::MAX_HEADER_LEN`] or past the end of the
    /// input; invalid JSON; `ver` other than the integer 1; `arch` missing or not
    /// `"x64"`/`"x86"`; a non-empty `compression`.
    pub fn parse(data: &[u8]) -> Result<(Header, usize), Error> {
        let mut cur = Cursor::new(data);
        let prefix: &FilePrefix = cur.read_ref()?;
        if prefix.magic != raw::MAGIC {
            return Err(Error::BadMagic {
                offset: Offset(0),
                found: prefix.magic,
            });
        }
        let len = prefix.json_len.get();
        LimitExceeded::check(
            Offset(4),
            "JSON header length",
            u64::from(len),
            u64::from(limits::MAX_HEADER_LEN),
        )?;
        let len = usize::try_from(len).map_err(|_| LimitExceeded {
            offset: Offset(4),
            what: "JSON header length",
            found: u64::from(len),
            limit: u64::from(limits::MAX_HEADER_LEN),
        })?;
        let json = cur.read_bytes(len)?;
        let header = Header::from_json(json)?;
        Ok((header, cur.position()))
    }

    /// Parses the JSON text of a header (which starts at file offset 8).
    ///
    /// # Errors
    ///
    /// As [`Header::parse`].
    pub fn from_json(json: &[u8]) -> Result<Header, Error> {
        let at = Offset(raw::HEADER_JSON_OFFSET);
        let raw: RawHeader = serde_json::from_slice(json).map_err(|e| {
            // Compact JSON is one line: the column is the byte position (1-based).
            let col = if e.line() <= 1 {
                e.column().saturating_sub(1)
            } else {
                0
            };
            Error::BadJson {
                offset: at.add(col as u64),
                message: strip_position(&e.to_string()),
            }
        })?;
        match &raw.ver {
            Some(v) if v.as_u64() == Some(1) => {}
            Some(v) => {
                return Err(Error::UnsupportedVersion {
                    offset: at,
                    found: v.to_string(),
                });
            }
            None => {
                return Err(Error::BadHeader {
                    offset: at,
                    what: "\"ver\" is missing".into(),
                });
            }
        }
        let arch = match raw.arch.as_ref().and_then(Value::as_str) {
            Some("x64") => Arch::X64,
            Some("x86") => Arch::X86,
            Some(_) | None => {
                let found = raw
                    .arch
                    .as_ref()
                    .map_or_else(|| "missing".to_owned(), |v| format!("is {v}"));
                return Err(Error::BadHeader {
                    offset: at,
                    what: format!("\"arch\" {found}, expected \"x64\" or \"x86\""),
                });
            }
        };
        if let Some(c) = raw.compression.as_deref()
            && !c.is_empty()
        {
            return Err(Error::BadHeader {
                offset: at,
                what: format!("\"compression\" is {c:?}, only \"\" (none) exists"),
            });
        }
        Ok(Header {
            arch,
            hash_algorithm: raw.hash_algorithm,
            hash: raw.hash,
            compression: raw.compression,
            path: raw.path,
            extra: raw.extra,
        })
    }

    /// The compact JSON text, keys in x64dbg's order (`ver`, `arch`, `hashAlgorithm`, `hash`,
    /// `compression`, `path`), then the extra keys.
    #[must_use]
    pub fn to_json(&self) -> String {
        let mut s = String::with_capacity(160);
        s.push_str("{\"ver\":1,\"arch\":\"");
        s.push_str(self.arch.name());
        s.push('"');
        let mut field = |key: &str, value: &Value| {
            s.push(',');
            s.push_str(&Value::String(key.to_owned()).to_string());
            s.push(':');
            s.push_str(&value.to_string());
        };
        let known = [
            ("hashAlgorithm", &self.hash_algorithm),
            ("hash", &self.hash),
            ("compression", &self.compression),
            ("path", &self.path),
        ];
        for (key, value) in known {
            if let Some(v) = value {
                field(key, &Value::String(v.clone()));
            }
        }
        for (key, value) in &self.extra {
            field(key, value);
        }
        s.push('}');
        s
    }

    /// The file prefix and JSON header bytes.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRecord`] if the JSON is longer than [`limits::MAX_HEADER_LEN`].
    pub fn to_bytes(&self) -> Result<Vec<u8>, Error> {
        let json = self.to_json();
        let len = u32::try_from(json.len())
            .ok()
            .filter(|&l| l <= limits::MAX_HEADER_LEN)
            .ok_or(Error::InvalidRecord {
                record: 0,
                what: "JSON header longer than 1 MiB",
            })?;
        let mut out = Vec::with_capacity(json.len().saturating_add(8));
        out.extend_from_slice(&raw::MAGIC);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(json.as_bytes());
        Ok(out)
    }
}

/// serde_json appends " at line L column C"; the offset says it better.
fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg.get(..i).unwrap_or(msg).to_owned(),
        None => msg.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REAL: &str = r#"{"ver":1,"arch":"x64","hashAlgorithm":"murmurhash","hash":"0x3A6C6FA546C8A44E","compression":"","path":"F:\\Factorio\\bin\\x64\\factorio.exe"}"#;

    #[test]
    fn real_header_round_trips_byte_for_byte() {
        let h = Header::from_json(REAL.as_bytes()).unwrap();
        assert_eq!(h.arch, Arch::X64);
        assert_eq!(h.path.as_deref(), Some(r"F:\Factorio\bin\x64\factorio.exe"));
        assert_eq!(h.hash_value(), Some(0x3A6C_6FA5_46C8_A44E));
        assert_eq!(h.to_json(), REAL);
        assert_eq!(REAL.len(), 142);
    }

    #[test]
    fn unknown_keys_are_kept() {
        let h = Header::from_json(br#"{"ver":1,"arch":"x86","zz":[1,2],"cpu":"GenuineIntel"}"#)
            .unwrap();
        assert_eq!(h.arch, Arch::X86);
        assert_eq!(h.extra.len(), 2);
        let again = Header::from_json(h.to_json().as_bytes()).unwrap();
        assert_eq!(again, h);
    }

    #[test]
    fn long_headers_are_accepted_up_to_the_cap() {
        // Above x64dbg's 16 KiB but below the 1 MiB cap: read, with the long value kept.
        let long = "x".repeat(20_000);
        let json = format!(r#"{{"ver":1,"arch":"x64","comment":"{long}"}}"#);
        let mut bytes = b"TRAC".to_vec();
        bytes.extend_from_slice(&(json.len() as u32).to_le_bytes());
        bytes.extend_from_slice(json.as_bytes());
        let (h, first) = Header::parse(&bytes).unwrap();
        assert_eq!(first, bytes.len());
        assert_eq!(h.extra["comment"].as_str().map(str::len), Some(20_000));
        // A length above the cap is refused before anything is read or allocated.
        let mut bytes = b"TRAC".to_vec();
        bytes.extend_from_slice(&(limits::MAX_HEADER_LEN + 1).to_le_bytes());
        let e = Header::parse(&bytes).unwrap_err();
        assert_eq!(
            e.to_string(),
            "JSON header length is 1048577, above the limit of 1048576 at offset 0x4"
        );
    }

    #[test]
    fn header_errors() {
        let e = Header::from_json(br#"{"ver":2,"arch":"x64"}"#).unwrap_err();
        assert!(matches!(e, Error::UnsupportedVersion { .. }), "{e}");
        let e = Header::from_json(br#"{"ver":"1","arch":"x64"}"#).unwrap_err();
        assert!(e.to_string().contains("\"1\""), "{e}");
        let e = Header::from_json(br#"{"ver":1,"arch":"arm"}"#).unwrap_err();
        assert!(e.to_string().ends_with("at offset 0x8"), "{e}");
        let e = Header::from_json(br#"{"ver":1}"#).unwrap_err();
        assert!(e.to_string().contains("missing"), "{e}");
        let e = Header::from_json(br#"{"ver":1,"arch":"x64""#).unwrap_err();
        assert!(matches!(e, Error::BadJson { .. }), "{e}");
        let mut bytes = b"TRAC".to_vec();
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        let e = Header::parse(&bytes).unwrap_err();
        assert!(matches!(e, Error::Limit(_)), "{e}");
        let mut bytes = b"TRAC".to_vec();
        bytes.extend_from_slice(&100u32.to_le_bytes());
        bytes.extend_from_slice(b"{\"ver\":1");
        let e = Header::parse(&bytes).unwrap_err();
        assert!(matches!(e, Error::Eof(_)), "{e}");
        assert!(matches!(
            Header::parse(b"TRAX\0\0\0\0"),
            Err(Error::BadMagic { .. })
        ));
    }
}
