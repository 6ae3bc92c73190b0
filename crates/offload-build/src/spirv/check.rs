//! Checks of a SPIR-V image that `spirv-val` cannot make: the kernel ABI the runtime relies on.
//!
//! Every kernel parameter that is a pointer must be a CrossWorkgroup buffer, except a by-value
//! aggregate (Function storage, decorated `FuncParamAttr ByVal`) and the two hidden parameters
//! the `offload-spirv` pass appends: the dynamic shared memory (a Workgroup pointer) and its size
//! (a 64-bit integer). A buffer in Function storage would compile and validate, and read private
//! memory at run time: the mistake a plain retargeting of Rust's bitcode makes.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::Command;

const MAGIC: u32 = 0x0723_0203;

// Opcodes and operands used here (SPIR-V specification, section 3).
const OP_ENTRY_POINT: u32 = 15;
const OP_EXECUTION_MODE: u32 = 16;
const OP_TYPE_INT: u32 = 21;
const OP_TYPE_POINTER: u32 = 32;
const OP_FUNCTION: u32 = 54;
const OP_FUNCTION_PARAMETER: u32 = 55;
const OP_FUNCTION_END: u32 = 56;
const OP_DECORATE: u32 = 71;
const EXECUTION_MODEL_KERNEL: u32 = 6;
const EXECUTION_MODE_SUBGROUP_SIZE: u32 = 35;
const DECORATION_FUNC_PARAM_ATTR: u32 = 38;
const FUNC_PARAM_ATTR_BY_VAL: u32 = 2;

/// SPIR-V storage classes a kernel parameter may point to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage {
    Workgroup,
    CrossWorkgroup,
    Function,
    Other(u32),
}

impl Storage {
    fn from_word(word: u32) -> Storage {
        match word {
            4 => Storage::Workgroup,
            5 => Storage::CrossWorkgroup,
            7 => Storage::Function,
            other => Storage::Other(other),
        }
    }
}

/// One kernel parameter, as far as the ABI check cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Param {
    Pointer { storage: Storage, by_val: bool },
    Int64,
    Other,
}

/// A kernel of a SPIR-V module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpirvKernel {
    pub name: String,
    pub params: Vec<Param>,
    /// The sub-group size it requires (`OpExecutionMode SubgroupSize`), if any.
    pub subgroup_size: Option<u32>,
}

/// The kernels of a SPIR-V module, in the order of their `OpEntryPoint`s.
pub fn kernels(words: &[u32]) -> Result<Vec<SpirvKernel>, String> {
    if words.len() < 5 || words[0] != MAGIC {
        return Err("not a SPIR-V module (bad magic number)".into());
    }
    let mut entries: Vec<(u32, String)> = Vec::new();
    let mut pointers: HashMap<u32, Storage> = HashMap::new();
    let mut int64: HashSet<u32> = HashSet::new();
    let mut by_val: HashSet<u32> = HashSet::new();
    let mut subgroup_sizes: HashMap<u32, u32> = HashMap::new();
    let mut functions: HashMap<u32, Vec<(u32, u32)>> = HashMap::new();
    let mut current: Option<u32> = None;
    let mut at = 5;
    while at < words.len() {
        let count = (words[at] >> 16) as usize;
        let opcode = words[at] & 0xffff;
        if count == 0 || at + count > words.len() {
            return Err(format!("truncated instruction at word {at}"));
        }
        let operands = &words[at + 1..at + count];
        match opcode {
            OP_ENTRY_POINT if operands.len() >= 3 && operands[0] == EXECUTION_MODEL_KERNEL => {
                entries.push((operands[1], literal_string(&operands[2..])));
            }
            OP_EXECUTION_MODE
                if operands.len() >= 3 && operands[1] == EXECUTION_MODE_SUBGROUP_SIZE =>
            {
                subgroup_sizes.insert(operands[0], operands[2]);
            }
            OP_TYPE_INT if operands.len() >= 2 && operands[1] == 64 => {
                int64.insert(operands[0]);
            }
            OP_TYPE_POINTER if operands.len() >= 2 => {
                pointers.insert(operands[0], Storage::from_word(operands[1]));
            }
            OP_DECORATE
                if operands.len() >= 3
                    && operands[1] == DECORATION_FUNC_PARAM_ATTR
                    && operands[2] == FUNC_PARAM_ATTR_BY_VAL =>
            {
                by_val.insert(operands[0]);
            }
            OP_FUNCTION if operands.len() >= 2 => {
                current = Some(operands[1]);
                functions.insert(operands[1], Vec::new());
            }
            OP_FUNCTION_PARAMETER if operands.len() >= 2 => {
                if let Some(f) = current {
                    functions
                        .entry(f)
                        .or_default()
                        .push((operands[0], operands[1]));
                }
            }
            OP_FUNCTION_END => current = None,
            _ => {}
        }
        at += count;
    }
    entries
        .into_iter()
        .map(|(function, name)| {
            let params = functions
                .get(&function)
                .ok_or_else(|| format!("entry point {name} names no function"))?
                .iter()
                .map(|&(ty, id)| match pointers.get(&ty) {
                    Some(&storage) => Param::Pointer {
                        storage,
                        by_val: by_val.contains(&id),
                    },
                    None if int64.contains(&ty) => Param::Int64,
                    None => Param::Other,
                })
                .collect();
            Ok(SpirvKernel {
                name,
                params,
                subgroup_size: subgroup_sizes.get(&function).copied(),
            })
        })
        .collect()
}

/// A nul-terminated UTF-8 string packed little-endian into words.
fn literal_string(words: &[u32]) -> String {
    let bytes: Vec<u8> = words
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .take_while(|&b| b != 0)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The module's words (SPIR-V is a stream of little-endian 32-bit words here).
pub fn words(bytes: &[u8]) -> Result<Vec<u32>, String> {
    if bytes.len() % 4 != 0 {
        return Err(format!(
            "{} bytes is not a whole number of words",
            bytes.len()
        ));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// Checks every kernel's parameters (see the module docs); returns the kernel names in order.
pub fn check_kernel_abi(words: &[u32]) -> Result<Vec<String>, String> {
    let kernels = kernels(words)?;
    let mut problems = Vec::new();
    for SpirvKernel { name, params, .. } in &kernels {
        let n = params.len();
        if n < 2
            || params[n - 2]
                != (Param::Pointer {
                    storage: Storage::Workgroup,
                    by_val: false,
                })
            || params[n - 1] != Param::Int64
        {
            problems.push(format!(
                "{name}: the last two parameters are not the dynamic shared memory (a Workgroup pointer) and its size"
            ));
            continue;
        }
        for (i, p) in params[..n - 2].iter().enumerate() {
            match *p {
                Param::Pointer {
                    storage: Storage::CrossWorkgroup,
                    by_val: false,
                } => {}
                Param::Pointer {
                    storage: Storage::Function,
                    by_val: true,
                } => {}
                Param::Pointer { storage, by_val } => problems.push(format!(
                    "{name}: parameter {i} is a {storage:?} pointer{}, not a CrossWorkgroup buffer",
                    if by_val { " (byval)" } else { "" }
                )),
                Param::Int64 | Param::Other => {}
            }
        }
    }
    if problems.is_empty() {
        Ok(kernels.into_iter().map(|k| k.name).collect())
    } else {
        Err(problems.join("\n"))
    }
}

/// `spirv-val` for the environment the runtime loads the image in: SPIR-V 1.4, the newest that
/// OpenCL 3.0 devices take (SPIRV-Tools has no OpenCL 3.0 environment, and its `opencl2.2` one
/// stops at SPIR-V 1.2, older than the sub-group instructions the images use).
pub(crate) fn spirv_val(spirv_val: &Path, image: &Path) -> Result<(), String> {
    let out = Command::new(spirv_val)
        .args(["--target-env", "spv1.4"])
        .arg(image)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", spirv_val.display()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "spirv-val rejects {}:\n{}{}",
            image.display(),
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Assembles instructions (opcode, operands) after a header.
    fn module(instructions: &[(u32, &[u32])]) -> Vec<u32> {
        let mut words = vec![MAGIC, 0x0001_0400, 0, 100, 0];
        for (opcode, operands) in instructions {
            words.push(((operands.len() as u32 + 1) << 16) | opcode);
            words.extend_from_slice(operands);
        }
        words
    }

    /// "saxpy\0" as words.
    const SAXPY: [u32; 2] = [0x7078_6173, 0x0000_0079];

    fn kernel(param_types: &[u32], decorate_byval: Option<u32>) -> Vec<u32> {
        let mut ins: Vec<(u32, Vec<u32>)> = vec![
            (
                OP_ENTRY_POINT,
                vec![EXECUTION_MODEL_KERNEL, 50, SAXPY[0], SAXPY[1]],
            ),
            (OP_TYPE_INT, vec![10, 64, 0]),
            (OP_TYPE_INT, vec![11, 32, 0]),
            (OP_TYPE_POINTER, vec![20, 5, 11]), // CrossWorkgroup
            (OP_TYPE_POINTER, vec![21, 7, 11]), // Function
            (OP_TYPE_POINTER, vec![22, 4, 11]), // Workgroup
            (OP_TYPE_POINTER, vec![23, 8, 11]), // Generic
        ];
        if let Some(id) = decorate_byval {
            ins.push((
                OP_DECORATE,
                vec![id, DECORATION_FUNC_PARAM_ATTR, FUNC_PARAM_ATTR_BY_VAL],
            ));
        }
        ins.push((OP_FUNCTION, vec![1, 50, 0, 2]));
        for (i, ty) in param_types.iter().enumerate() {
            ins.push((OP_FUNCTION_PARAMETER, vec![*ty, 60 + i as u32]));
        }
        ins.push((OP_FUNCTION_END, vec![]));
        let refs: Vec<(u32, &[u32])> = ins.iter().map(|(o, v)| (*o, v.as_slice())).collect();
        module(&refs)
    }

    #[test]
    fn buffers_in_cross_workgroup_memory_pass() {
        let words = kernel(&[11, 20, 10, 21, 22, 10], Some(63));
        assert_eq!(check_kernel_abi(&words).unwrap(), ["saxpy"]);
    }

    #[test]
    fn a_buffer_in_function_storage_is_refused() {
        let err = check_kernel_abi(&kernel(&[21, 10, 22, 10], None)).unwrap_err();
        assert!(
            err.contains("saxpy: parameter 0 is a Function pointer"),
            "{err}"
        );
        let err = check_kernel_abi(&kernel(&[23, 10, 22, 10], None)).unwrap_err();
        assert!(err.contains("parameter 0 is a Other(8) pointer"), "{err}");
    }

    #[test]
    fn the_hidden_parameters_are_required() {
        let err = check_kernel_abi(&kernel(&[20, 10], None)).unwrap_err();
        assert!(err.contains("the last two parameters"), "{err}");
    }

    #[test]
    fn bad_modules_are_errors() {
        assert!(check_kernel_abi(&[1, 2, 3, 4, 5]).is_err());
        let mut words = kernel(&[20, 10, 22, 10], None);
        words.truncate(words.len() - 1);
        words.push(0x0005_0000 | OP_FUNCTION_PARAMETER);
        assert!(check_kernel_abi(&words).is_err());
        assert!(super::words(&[1, 2, 3]).is_err());
    }
}
