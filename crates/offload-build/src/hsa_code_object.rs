//! Reading an HSA code object (an AMDGPU ELF shared object): the architecture its ELF header
//! names, and the kernels its `NT_AMDGPU_METADATA` note describes (LLVM's AMDGPUUsage, "Code
//! Object V5 Metadata"), with each argument's place in the kernarg segment.

use crate::msgpack::{self, Value};

/// What the build pass checks and reports of one code object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeObject {
    /// The GPU the ELF header names (`e_flags`), such as `gfx942`.
    pub arch: String,
    /// `amdhsa.target` of the metadata, such as `amdgcn-amd-amdhsa--gfx942`.
    pub target: String,
    /// Code object version (5 for `EI_ABIVERSION` 3).
    pub version: u32,
    pub kernels: Vec<KernelMetadata>,
    /// Symbols the code object needs from elsewhere (it can get none: nothing links it further).
    pub undefined_symbols: Vec<String>,
}

/// One entry of `amdhsa.kernels`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelMetadata {
    pub name: String,
    pub args: Vec<KernelArgument>,
    pub kernarg_segment_size: u64,
    pub group_segment_fixed_size: u64,
    pub private_segment_fixed_size: u64,
    pub sgpr_count: u64,
    pub vgpr_count: u64,
    pub wavefront_size: u64,
}

/// One entry of a kernel's `.args`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelArgument {
    /// `.name`, when the compiler kept one.
    pub name: Option<String>,
    pub offset: u64,
    pub size: u64,
    /// `.value_kind`: `by_value`, `global_buffer`, ..., or `hidden_*` for what the runtime
    /// appends after the explicit arguments.
    pub value_kind: String,
}

impl KernelArgument {
    pub fn is_hidden(&self) -> bool {
        self.value_kind.starts_with("hidden_")
    }
}

const EM_AMDGPU: u16 = 224;
const ELFOSABI_AMDGPU_HSA: u8 = 64;
const SHT_SYMTAB: u32 = 2;
const SHT_NOTE: u32 = 7;
const SHT_DYNSYM: u32 = 11;
const NT_AMDGPU_METADATA: u32 = 32;
const EF_AMDGPU_MACH: u32 = 0xff;

/// `EF_AMDGPU_MACH_*` values of LLVM's ELF.h (checked against llc-22's output) for common GPUs.
const MACHS: &[(u32, &str)] = &[
    (0x30, "gfx908"),
    (0x36, "gfx1030"),
    (0x3f, "gfx90a"),
    (0x41, "gfx1100"),
    (0x46, "gfx1101"),
    (0x47, "gfx1102"),
    (0x48, "gfx1200"),
    (0x4c, "gfx942"),
    (0x4e, "gfx1201"),
    (0x4f, "gfx950"),
];

/// The architecture name of an `EF_AMDGPU_MACH` value, or the value in hex.
fn mach_name(mach: u32) -> String {
    MACHS
        .iter()
        .find(|(m, _)| *m == mach)
        .map_or_else(|| format!("mach 0x{mach:x}"), |(_, name)| name.to_string())
}

/// The `EF_AMDGPU_MACH` value of `arch`, when this reader knows it.
pub fn mach_of(arch: &str) -> Option<u32> {
    MACHS.iter().find(|(_, n)| *n == arch).map(|(m, _)| *m)
}

/// Reads a code object.
pub fn read(elf: &[u8]) -> Result<CodeObject, String> {
    let e = Elf::new(elf)?;
    let arch = mach_name(e.u32(0x30)? & EF_AMDGPU_MACH);
    let version = match elf[8] {
        v @ 1..=4 => v as u32 + 2,
        v => return Err(format!("unknown AMDGPU ABI version {v}")),
    };
    let mut metadata = None;
    let mut undefined_symbols = Vec::new();
    for section in e.sections()? {
        match section.kind {
            SHT_NOTE => {
                for (name, kind, desc) in notes(e.slice(section.offset, section.size)?)? {
                    if name == b"AMDGPU" && kind == NT_AMDGPU_METADATA {
                        metadata = Some(msgpack::decode(desc)?);
                    }
                }
            }
            SHT_SYMTAB | SHT_DYNSYM => undefined_symbols.extend(e.undefined_symbols(&section)?),
            _ => {}
        }
    }
    undefined_symbols.sort();
    undefined_symbols.dedup();
    let metadata = metadata.ok_or("no NT_AMDGPU_METADATA note")?;
    let target = metadata
        .get("amdhsa.target")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let kernels = metadata
        .get("amdhsa.kernels")
        .and_then(Value::as_array)
        .ok_or("metadata without amdhsa.kernels")?
        .iter()
        .map(kernel)
        .collect::<Result<_, _>>()?;
    Ok(CodeObject {
        arch,
        target,
        version,
        kernels,
        undefined_symbols,
    })
}

fn kernel(k: &Value) -> Result<KernelMetadata, String> {
    let name = k
        .get(".name")
        .and_then(Value::as_str)
        .ok_or("a kernel without .name")?
        .to_string();
    let number = |key: &str| {
        k.get(key)
            .and_then(Value::as_u64)
            .ok_or_else(|| format!("kernel {name}: no {key}"))
    };
    let args = match k.get(".args") {
        None => Vec::new(),
        Some(args) => args
            .as_array()
            .ok_or_else(|| format!("kernel {name}: .args is not a list"))?
            .iter()
            .map(|a| {
                let field = |key: &str| {
                    a.get(key)
                        .and_then(Value::as_u64)
                        .ok_or_else(|| format!("kernel {name}: an argument without {key}"))
                };
                Ok(KernelArgument {
                    name: a.get(".name").and_then(Value::as_str).map(String::from),
                    offset: field(".offset")?,
                    size: field(".size")?,
                    value_kind: a
                        .get(".value_kind")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                })
            })
            .collect::<Result<_, String>>()?,
    };
    Ok(KernelMetadata {
        args,
        kernarg_segment_size: number(".kernarg_segment_size")?,
        group_segment_fixed_size: number(".group_segment_fixed_size")?,
        private_segment_fixed_size: number(".private_segment_fixed_size")?,
        sgpr_count: number(".sgpr_count")?,
        vgpr_count: number(".vgpr_count")?,
        wavefront_size: number(".wavefront_size")?,
        name,
    })
}

/// One ELF note: its name without the NUL, its type, its descriptor.
type Note<'a> = (&'a [u8], u32, &'a [u8]);

/// The notes of a note section.
fn notes(mut bytes: &[u8]) -> Result<Vec<Note<'_>>, String> {
    let mut found = Vec::new();
    let word = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    while bytes.len() >= 12 {
        let (name_len, desc_len, kind) = (
            word(bytes, 0) as usize,
            word(bytes, 4) as usize,
            word(bytes, 8),
        );
        let desc_at = 12 + name_len.next_multiple_of(4);
        let end = desc_at + desc_len.next_multiple_of(4);
        if end > bytes.len() || desc_at + desc_len > bytes.len() {
            return Err("a note runs past its section".into());
        }
        let name = &bytes[12..12 + name_len];
        let name = name.strip_suffix(b"\0").unwrap_or(name);
        found.push((name, kind, &bytes[desc_at..desc_at + desc_len]));
        bytes = &bytes[end..];
    }
    Ok(found)
}

struct Elf<'a> {
    bytes: &'a [u8],
}

struct Section {
    kind: u32,
    offset: u64,
    size: u64,
    link: u32,
    entry_size: u64,
}

impl<'a> Elf<'a> {
    fn new(bytes: &'a [u8]) -> Result<Self, String> {
        if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" {
            return Err("not an ELF file".into());
        }
        if bytes[4] != 2 || bytes[5] != 1 {
            return Err("not a little-endian 64-bit ELF file".into());
        }
        let e = Elf { bytes };
        if e.u16(0x12)? != EM_AMDGPU || bytes[7] != ELFOSABI_AMDGPU_HSA {
            return Err("not an AMDGPU HSA code object".into());
        }
        Ok(e)
    }

    fn slice(&self, offset: u64, len: u64) -> Result<&'a [u8], String> {
        let start = usize::try_from(offset).map_err(|e| e.to_string())?;
        let len = usize::try_from(len).map_err(|e| e.to_string())?;
        start
            .checked_add(len)
            .and_then(|end| self.bytes.get(start..end))
            .ok_or_else(|| "an ELF offset points past the file".to_string())
    }

    fn u16(&self, at: u64) -> Result<u16, String> {
        Ok(u16::from_le_bytes(self.slice(at, 2)?.try_into().unwrap()))
    }

    fn u32(&self, at: u64) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.slice(at, 4)?.try_into().unwrap()))
    }

    fn u64(&self, at: u64) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.slice(at, 8)?.try_into().unwrap()))
    }

    fn sections(&self) -> Result<Vec<Section>, String> {
        let (table, entry_size, count) = (self.u64(0x28)?, self.u16(0x3a)? as u64, self.u16(0x3c)?);
        (0..count as u64)
            .map(|i| {
                let at = table + i * entry_size;
                Ok(Section {
                    kind: self.u32(at + 4)?,
                    offset: self.u64(at + 0x18)?,
                    size: self.u64(at + 0x20)?,
                    link: self.u32(at + 0x28)?,
                    entry_size: self.u64(at + 0x38)?,
                })
            })
            .collect()
    }

    /// Names of the undefined symbols (section index 0) of a symbol table, but the null symbol.
    fn undefined_symbols(&self, table: &Section) -> Result<Vec<String>, String> {
        let sections = self.sections()?;
        let strings = sections
            .get(table.link as usize)
            .ok_or("a symbol table without its string table")?;
        let strings = self.slice(strings.offset, strings.size)?;
        let entry_size = table.entry_size.max(24);
        let mut names = Vec::new();
        for i in 1..table.size / entry_size {
            let at = table.offset + i * entry_size;
            let name_at = self.u32(at)? as usize;
            let section_index = self.u16(at + 6)?;
            if section_index == 0 {
                let name = strings.get(name_at..).unwrap_or_default();
                let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
                names.push(String::from_utf8_lossy(&name[..end]).into_owned());
            }
        }
        Ok(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_a_code_object() {
        assert!(read(b"hello").is_err());
        let mut elf = vec![0u8; 64];
        elf[..4].copy_from_slice(b"\x7fELF");
        elf[4] = 2;
        elf[5] = 1;
        assert_eq!(
            read(&elf).unwrap_err(),
            "not an AMDGPU HSA code object",
            "an x86 ELF"
        );
    }

    #[test]
    fn notes_are_split_and_padded() {
        let mut section = Vec::new();
        for (name, kind, desc) in [(&b"AMDGPU\0"[..], 32u32, &b"abcde"[..]), (b"GNU\0", 3, b"")] {
            section.extend((name.len() as u32).to_le_bytes());
            section.extend((desc.len() as u32).to_le_bytes());
            section.extend(kind.to_le_bytes());
            section.extend(name);
            section.resize(section.len().next_multiple_of(4), 0);
            section.extend(desc);
            section.resize(section.len().next_multiple_of(4), 0);
        }
        let found = notes(&section).unwrap();
        assert_eq!(
            found,
            [(&b"AMDGPU"[..], 32, &b"abcde"[..]), (b"GNU", 3, b"")]
        );
        assert!(notes(&section[..20]).is_err());
    }

    #[test]
    fn architecture_names() {
        for arch in ["gfx90a", "gfx942", "gfx1100"] {
            assert_eq!(mach_name(mach_of(arch).unwrap()), arch);
        }
        assert_eq!(mach_name(0x7e), "mach 0x7e");
    }
}
