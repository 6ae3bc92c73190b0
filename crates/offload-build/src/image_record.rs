//! The record in which a program carries one crate's device images: written by the device pass,
//! placed by `offload::embed_images!()` in the ELF section [`SECTION`], read back by
//! `cargo offload images` from a built program.
//!
//! The images themselves live inside the record (the runtime's `DeviceImage::bytes` are slices
//! of it), so a program holds each image once and a reader needs no symbols or relocations:
//! every record in the section describes itself. Layout, integers little-endian:
//!
//! ```text
//! MAGIC (8 bytes), version u32, record length u64 (header and images)
//! crate name, unavailable reason (empty: none): each a u32 length and UTF-8 bytes
//! kernel count u32, then each kernel name (u32 length, UTF-8)
//! image count u32, then per image: format, target (u32 length, UTF-8), offset u64 (from the
//!     record's start), length u64
//! the images' bytes
//! ```
//!
//! Records follow one another in the section (one per crate that embeds images; a std::offload
//! program embeds one per kernel); a linker may pad between them with zero bytes.

use std::ops::Range;

/// The ELF section holding the records.
pub const SECTION: &str = ".offload_images";

const MAGIC: &[u8; 8] = b"OFFLDIMG";
const VERSION: u32 = 1;

/// One image of a record, as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordImage<'a> {
    /// `cubin`, `ptx`, … (the runtime's `ImageFormat`, lower case).
    pub format: &'a str,
    /// The architecture it was built for, such as `sm_90`.
    pub target: &'a str,
    pub bytes: &'a [u8],
}

/// What one crate embedded: its kernels and images, or why it has none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageRecord<'a> {
    pub crate_name: &'a str,
    pub kernels: Vec<&'a str>,
    pub images: Vec<RecordImage<'a>>,
    /// Why the build embedded no images (no device toolchain, say).
    pub unavailable: Option<&'a str>,
}

impl ImageRecord<'_> {
    /// The record's bytes, and where each image's bytes lie in them (in `images` order).
    pub fn encode(&self) -> (Vec<u8>, Vec<Range<usize>>) {
        let mut header = Vec::new();
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(&VERSION.to_le_bytes());
        let length_at = header.len();
        header.extend_from_slice(&0u64.to_le_bytes());
        put_str(&mut header, self.crate_name);
        put_str(&mut header, self.unavailable.unwrap_or(""));
        put_u32(&mut header, self.kernels.len());
        for k in &self.kernels {
            put_str(&mut header, k);
        }
        put_u32(&mut header, self.images.len());
        let mut offsets_at = Vec::new();
        for image in &self.images {
            put_str(&mut header, image.format);
            put_str(&mut header, image.target);
            offsets_at.push(header.len());
            header.extend_from_slice(&[0; 16]);
        }
        let mut record = header;
        let mut ranges = Vec::new();
        for (image, at) in self.images.iter().zip(offsets_at) {
            let range = record.len()..record.len() + image.bytes.len();
            record[at..at + 8].copy_from_slice(&(range.start as u64).to_le_bytes());
            record[at + 8..at + 16].copy_from_slice(&(image.bytes.len() as u64).to_le_bytes());
            record.extend_from_slice(image.bytes);
            ranges.push(range);
        }
        let total = record.len() as u64;
        record[length_at..length_at + 8].copy_from_slice(&total.to_le_bytes());
        (record, ranges)
    }
}

/// Every record in the contents of a [`SECTION`], in order.
pub fn decode_section(section: &[u8]) -> Result<Vec<ImageRecord<'_>>, String> {
    let mut records = Vec::new();
    let mut at = 0;
    while at < section.len() {
        if section[at] == 0 {
            at += 1;
            continue;
        }
        let (record, len) =
            decode_record(&section[at..]).map_err(|e| format!("record at byte {at}: {e}"))?;
        records.push(record);
        at += len;
    }
    Ok(records)
}

/// One record at the start of `bytes`, and its length.
fn decode_record(bytes: &[u8]) -> Result<(ImageRecord<'_>, usize), String> {
    let mut r = Reader { bytes, at: 0 };
    if r.take(MAGIC.len())? != MAGIC {
        return Err("not an offload image record (bad magic)".into());
    }
    let version = r.u32()?;
    if version != VERSION {
        return Err(format!(
            "record version {version}; this reader knows version {VERSION}"
        ));
    }
    let total = usize::try_from(r.u64()?).map_err(|_| "record length overflows")?;
    if total > bytes.len() {
        return Err(format!(
            "record of {total} bytes runs past the section's end ({} bytes left)",
            bytes.len()
        ));
    }
    let record = &bytes[..total];
    let mut r = Reader {
        bytes: record,
        at: r.at,
    };
    let crate_name = r.str()?;
    let unavailable = Some(r.str()?).filter(|s| !s.is_empty());
    let kernels = (0..r.u32()?).map(|_| r.str()).collect::<Result<_, _>>()?;
    let count = r.u32()?;
    let mut images = Vec::new();
    for _ in 0..count {
        let format = r.str()?;
        let target = r.str()?;
        let start = usize::try_from(r.u64()?).map_err(|_| "image offset overflows")?;
        let len = usize::try_from(r.u64()?).map_err(|_| "image length overflows")?;
        let bytes = start
            .checked_add(len)
            .and_then(|end| record.get(start..end))
            .ok_or_else(|| {
                format!("image {format} {target} ({len} bytes at {start}) lies outside its record")
            })?;
        images.push(RecordImage {
            format,
            target,
            bytes,
        });
    }
    let record = ImageRecord {
        crate_name,
        kernels,
        images,
        unavailable,
    };
    Ok((record, total))
}

fn put_u32(out: &mut Vec<u8>, n: usize) {
    let n = u32::try_from(n).expect("offload-build: a record field exceeds u32");
    out.extend_from_slice(&n.to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u32(out, s.len());
    out.extend_from_slice(s.as_bytes());
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or_else(|| format!("truncated at byte {}", self.at))?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, String> {
        let mut word = [0; 8];
        word.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(word))
    }

    fn str(&mut self) -> Result<&'a str, String> {
        let len = self.u32()? as usize;
        let at = self.at;
        std::str::from_utf8(self.take(len)?)
            .map_err(|_| format!("a name at byte {at} is not UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ImageRecord<'static> {
        ImageRecord {
            crate_name: "demo",
            kernels: vec!["saxpy", "stencil"],
            images: vec![
                RecordImage {
                    format: "cubin",
                    target: "sm_90",
                    bytes: b"\x7fELF cubin",
                },
                RecordImage {
                    format: "ptx",
                    target: "sm_90",
                    bytes: b".version 8.0\0",
                },
            ],
            unavailable: None,
        }
    }

    #[test]
    fn records_round_trip_with_padding_between_them() {
        let none = ImageRecord {
            crate_name: "other",
            kernels: vec![],
            images: vec![],
            unavailable: Some("no device toolchain"),
        };
        let (a, ranges) = sample().encode();
        assert_eq!(&a[ranges[0].clone()], b"\x7fELF cubin");
        assert_eq!(&a[ranges[1].clone()], b".version 8.0\0");
        let (b, _) = none.encode();
        let section = [a, vec![0; 3], b].concat();
        assert_eq!(decode_section(&section).unwrap(), vec![sample(), none]);
    }

    #[test]
    fn damaged_sections_are_errors() {
        let (record, _) = sample().encode();
        let truncated = &record[..record.len() - 1];
        assert!(decode_section(truncated)
            .unwrap_err()
            .contains("runs past the section's end"));
        let mut bad_magic = record.clone();
        bad_magic[0] = b'X';
        assert!(decode_section(&bad_magic)
            .unwrap_err()
            .contains("bad magic"));
        let mut newer = record.clone();
        newer[8] = 2;
        assert!(decode_section(&newer).unwrap_err().contains("version 2"));
        // The last image's offset (its entry is the header's last 16 bytes, before the 23 bytes
        // of images) pointing past the record.
        let mut wild = record;
        let len = wild.len() as u64;
        let offset_at = wild.len() - 23 - 16;
        wild[offset_at..offset_at + 8].copy_from_slice(&len.to_le_bytes());
        assert!(decode_section(&wild)
            .unwrap_err()
            .contains("lies outside its record"));
        assert_eq!(decode_section(&[0, 0]).unwrap(), vec![]);
    }
}
