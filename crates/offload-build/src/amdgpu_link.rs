//! The AMD link step: from the bitcode rustc emitted for the device crate (fat LTO, nothing linked:
//! rustc's own amdgcn link panics) to an HSA code object.
//!
//! 1. Read the module's text (`llvm-link -S`) for the kernel entries the macro exported
//!    (`__offload_amdgpu_NAME`, every parameter by reference) and the `shared!` arrays.
//! 2. Write a glue module: each kernel `NAME` as an `amdgpu_kernel` taking every parameter
//!    `byref` in the kernarg segment (laid out as the C struct the launcher packs) and calling
//!    its entry, with `"amdgpu-num-vgpr"` for `#[offload::kernel(max_registers = N)]`
//!    (`amdgpu_register_cap`); the `shared!` arrays as LDS; the operations Rust cannot spell
//!    (`SUPPORT`).
//! 3. `llvm-link` both, `opt` (internalize all but the kernels and the panic record, then the
//!    O3 pipeline, whose AMDGPU attribute inference drops the hidden arguments kernels do not
//!    use), FMA contraction flags for `#[offload::kernel(fma)]` kernels, `llc` (code object v5),
//!    `ld.lld --no-undefined -shared`.

use crate::amdgpu_register_cap::num_vgpr_attribute;
use crate::kernel_abi::{Entry, ParamSlot};
use std::ffi::OsStr;
use std::fmt::Write;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Prefix of the exported Rust entry of each kernel (see offload-macros' `amdgpu_entry`).
pub const ENTRY_PREFIX: &str = "__offload_amdgpu_";

/// Globals the runtime looks up by name: kept whatever the kernels use.
const KEPT_GLOBALS: [&str; 2] = ["OFFLOAD_PANIC_RECORD", "OFFLOAD_PANIC_FLAG_PTR"];

/// The LLVM tools of the step.
pub struct Tools<'a> {
    pub llvm_link: &'a Path,
    pub opt: &'a Path,
    pub llc: &'a Path,
    pub lld: &'a Path,
}

/// How IR prints, on a `define` line, the start of the section that names a kernel's code options
/// (offload-macros' `KernelOptions::entry_section`: `.offload`, then `.fma` and `.maxnreg<N>`).
const OPTIONS_SECTION: &str = " section \".offload.";

/// The sections of `fma` and `fast_math` kernels' wrappers, which `apply_code_options` reads
/// after inlining.
const FMA_SECTION: &str = " section \".offload.fma\"";
const FAST_MATH_SECTION: &str = " section \".offload.fma.fastmath\"";

/// What `fast_math` puts on a function's `define` line: subnormal f32 values flush to zero.
const FLUSH_TO_ZERO: &str = " \"denormal-fp-math-f32\"=\"preserve-sign,preserve-sign\"";

/// The module-wide code options of the link (offload-build's `Kernels` settings).
#[derive(Clone, Copy, Debug, Default)]
pub struct ModuleOptions {
    /// `Kernels::fma_contraction`: every kernel's float arithmetic may contract into FMAs.
    pub fma_contraction: bool,
    /// `Kernels::fast_math`: every function gets what a `fast_math` kernel gets.
    pub fast_math: bool,
}

/// A kernel's code options, as its entry's options section names them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct EntryOptions {
    /// `fma`: its float multiplies and adds may contract into FMAs.
    fma: bool,
    /// `fastmath` (`fast_math`): `fma`, flush to zero, approximate f32 division and square roots.
    fast_math: bool,
    /// `maxnreg<N>` (`max_registers = N`): at most N vector registers per lane
    /// (`amdgpu_register_cap`).
    max_registers: Option<u32>,
}

/// Where `line`'s options section starts and ends, and the options it names.
fn options_section(line: &str) -> Option<(usize, usize, EntryOptions)> {
    let start = line.find(OPTIONS_SECTION)?;
    let words = start + OPTIONS_SECTION.len();
    let len = line[words..].find('"')?;
    let mut options = EntryOptions::default();
    for word in line[words..words + len].split('.') {
        if word == "fma" {
            options.fma = true;
        } else if word == "fastmath" {
            options.fast_math = true;
        } else if let Some(n) = word.strip_prefix("maxnreg").and_then(|n| n.parse().ok()) {
            options.max_registers = Some(n);
        }
    }
    Some((start, words + len + 1, options))
}

/// Operations offload-kernel's `amdgpu` module declares, in IR: memory scopes, `s_barrier`, float
/// atomics on flat addresses, half conversions and the dynamic LDS base.
const SUPPORT: &str = r#"
define void @__offload_amdgpu_sync_threads() alwaysinline {
  fence syncscope("workgroup") release
  call void @llvm.amdgcn.s.barrier()
  fence syncscope("workgroup") acquire
  ret void
}
define void @__offload_amdgpu_sync_warp() alwaysinline {
  fence syncscope("wavefront") seq_cst
  call void @llvm.amdgcn.wave.barrier()
  ret void
}
define void @__offload_amdgpu_fence_block() alwaysinline {
  fence syncscope("workgroup") seq_cst
  ret void
}
define void @__offload_amdgpu_fence_device() alwaysinline {
  fence syncscope("agent") seq_cst
  ret void
}
define float @__offload_amdgpu_atomic_add_f32(ptr %p, float %v) alwaysinline {
  %old = atomicrmw fadd ptr %p, float %v syncscope("agent") monotonic, align 4
  ret float %old
}
define double @__offload_amdgpu_atomic_add_f64(ptr %p, double %v) alwaysinline {
  %old = atomicrmw fadd ptr %p, double %v syncscope("agent") monotonic, align 8
  ret double %old
}
define float @__offload_amdgpu_f16_to_f32(i16 %bits) alwaysinline {
  %h = bitcast i16 %bits to half
  %f = fpext half %h to float
  ret float %f
}
define i16 @__offload_amdgpu_f32_to_f16(float %x) alwaysinline {
  %h = fptrunc float %x to half
  %bits = bitcast half %h to i16
  ret i16 %bits
}
define i16 @__offload_amdgpu_f32_to_bf16(float %x) alwaysinline {
  %h = fptrunc float %x to bfloat
  %bits = bitcast bfloat %h to i16
  ret i16 %bits
}
@__offload_dyn_shared = external addrspace(3) global [0 x i8], align 16
define ptr @__offload_dyn_shared_base() alwaysinline {
  ret ptr addrspacecast (ptr addrspace(3) @__offload_dyn_shared to ptr)
}
declare void @llvm.amdgcn.s.barrier()
declare void @llvm.amdgcn.wave.barrier()
"#;

/// The kernel entries of a module's text, in order of definition, then those rustc merged into
/// another entry with the same code (an `alias` of it: generic instances whose code is the
/// same on this target), which take the same parameters.
pub fn entries(module: &str) -> Result<Vec<Entry>, String> {
    let mut found = Vec::new();
    for line in module.lines().filter(|l| l.starts_with("define ")) {
        let Some((kernel, params)) = entry_signature(line) else {
            continue;
        };
        let params = split_params(params)
            .iter()
            .enumerate()
            .map(|(i, p)| param_slot(p, i))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("entry of kernel {kernel}: {e}"))?;
        found.push(Entry { kernel, params });
    }
    for (kernel, target) in module.lines().filter_map(entry_alias) {
        let params = found
            .iter()
            .find(|e| e.kernel == target)
            .map(|e| e.params.clone())
            .ok_or_else(|| {
                format!("entry of kernel {kernel}: an alias of {target}, which is no entry")
            })?;
        found.push(Entry { kernel, params });
    }
    Ok(found)
}

/// The kernel of an entry alias line (`@__offload_amdgpu_A = ... alias ..., ptr
/// @__offload_amdgpu_B`) and the kernel whose entry it aliases.
fn entry_alias(line: &str) -> Option<(String, String)> {
    let (name, rest) = line.split_once(" = ")?;
    if !rest.split_whitespace().any(|w| w == "alias") {
        return None;
    }
    let unquote = |n: &str| {
        n.trim()
            .trim_start_matches('@')
            .trim_matches('"')
            .to_string()
    };
    let kernel = unquote(name).strip_prefix(ENTRY_PREFIX)?.to_string();
    let target = unquote(rest.rsplit_once(" ptr ")?.1)
        .strip_prefix(ENTRY_PREFIX)?
        .to_string();
    Some((kernel, target))
}

/// The kernel name and the parameter list of a `define` line of an entry.
fn entry_signature(line: &str) -> Option<(String, &str)> {
    let at = line
        .find(&format!("@{ENTRY_PREFIX}"))
        .or_else(|| line.find(&format!("@\"{ENTRY_PREFIX}")))?;
    let rest = &line[at + 1..];
    let (name, rest) = match rest.strip_prefix('"') {
        Some(quoted) => {
            let end = quoted.find('"')?;
            (&quoted[..end], &quoted[end + 1..])
        }
        None => {
            let end = rest.find('(')?;
            (&rest[..end], &rest[end..])
        }
    };
    let kernel = name.strip_prefix(ENTRY_PREFIX)?.to_string();
    let inner = rest.strip_prefix('(')?;
    let mut depth = 0usize;
    for (i, c) in inner.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => return Some((kernel, &inner[..i])),
            ')' => depth -= 1,
            _ => {}
        }
    }
    None
}

/// Parameters of an IR parameter list, split at top-level commas (attributes such as
/// `captures(address, read_provenance)` hold commas of their own).
fn split_params(list: &str) -> Vec<&str> {
    let mut params = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in list.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                params.push(list[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if !list[start..].trim().is_empty() {
        params.push(list[start..].trim());
    }
    params
}

/// One entry parameter: a reference, `ptr ... align A ... dereferenceable(N) ... %name` (LLVM
/// leaves out `align 1`, and `dereferenceable` for zero-sized pointees).
fn param_slot(param: &str, index: usize) -> Result<ParamSlot, String> {
    let tokens: Vec<&str> = param.split_whitespace().collect();
    if tokens.first() != Some(&"ptr") {
        return Err(format!(
            "parameter {index} is `{param}`, not a reference (offload-macros and offload-build \
             are out of step)"
        ));
    }
    let align = tokens
        .windows(2)
        .find(|w| w[0] == "align")
        .map_or(Ok(1), |w| w[1].parse())
        .map_err(|_| format!("parameter {index} (`{param}`) has an unreadable alignment"))?;
    let size = tokens
        .iter()
        .find_map(|t| {
            t.strip_prefix("dereferenceable(")?
                .strip_suffix(')')?
                .parse()
                .ok()
        })
        .unwrap_or(0);
    let name = tokens
        .last()
        .and_then(|t| t.strip_prefix('%'))
        .map(|n| n.trim_matches('"'))
        .filter(|n| !n.is_empty() && !n.chars().all(|c| c.is_ascii_digit()))
        .map_or_else(|| format!("arg{index}"), String::from);
    Ok(ParamSlot { name, size, align })
}

/// The `shared!` arrays of a module's text: for each extern `__offload_shared_*` byte array
/// (which only carries the size: rustc puts statics in the global address space), an LDS array
/// `__offload_lds_*` padded to 16 bytes (so the dynamic LDS after the static arrays stays 16-byte
/// aligned) and the `*_address` function the macro calls for its flat address.
fn shared_arrays(module: &str) -> String {
    let mut defs: Vec<String> = module
        .lines()
        .filter(|l| l.contains("__offload_shared_") && l.contains(" = external "))
        .filter_map(|l| {
            let (symbol, rest) = l.split_once(" = ")?;
            let bytes: u64 = rest
                .split_once("global [")?
                .1
                .split_once(" x i8]")?
                .0
                .parse()
                .ok()?;
            let name = symbol.strip_prefix('@')?.trim_matches('"');
            let lds = ir_global(&name.replacen("__offload_shared_", "__offload_lds_", 1));
            let address = ir_global(&format!("{name}_address"));
            Some(format!(
                "{lds} = internal addrspace(3) global [{} x i8] undef, align 16\n\
                 define ptr {address}(ptr %size) alwaysinline {{\n\
                 \x20 ret ptr addrspacecast (ptr addrspace(3) {lds} to ptr)\n}}",
                bytes.next_multiple_of(16)
            ))
        })
        .collect();
    defs.sort();
    defs.dedup();
    defs.join("\n")
}

/// The `amdgpu_kernel` of one entry for `arch`, with its `options`: in the FMA section for `fma`
/// (and the fast-math one for `fast_math`),
/// with `"amdgpu-num-vgpr"` for a register cap. The entry is inlined into it whatever its size:
/// left a function of its own, an entry that reaches dynamic LDS makes the backend give the
/// kernel every hidden argument (non-kernel code finds the dynamic LDS size there), which
/// liboffload would then have to fill.
fn kernel_wrapper(entry: &Entry, options: EntryOptions, arch: &str) -> Result<String, String> {
    let mut params = Vec::new();
    let mut body = String::new();
    let mut call_args = Vec::new();
    for (i, p) in entry.params.iter().enumerate() {
        let name = ir_name(&p.name, i);
        if p.size == 0 {
            // Nothing to pass: any aligned address serves a zero-sized value.
            call_args.push(format!("ptr inttoptr (i64 {} to ptr)", p.align.max(1)));
            continue;
        }
        params.push(format!(
            "ptr addrspace(4) noundef byref([{} x i8]) align {} %{name}",
            p.size, p.align
        ));
        writeln!(
            body,
            "  %{name}.flat = addrspacecast ptr addrspace(4) %{name} to ptr"
        )
        .unwrap();
        call_args.push(format!("ptr %{name}.flat"));
    }
    let callee = ir_global(&format!("{ENTRY_PREFIX}{}", entry.kernel));
    let pointers = vec!["ptr"; entry.params.len()].join(", ");
    let register_cap = match options.max_registers {
        Some(n) => format!(
            " \"amdgpu-num-vgpr\"=\"{}\"",
            num_vgpr_attribute(arch, n).map_err(|e| format!("kernel {}: {e}", entry.kernel))?
        ),
        None => String::new(),
    };
    Ok(format!(
        "declare void {callee}({pointers})\n\
         define amdgpu_kernel void {}({}){register_cap}{} {{\n{body}  call void {callee}({}) alwaysinline\n  ret void\n}}\n",
        ir_global(&entry.kernel),
        params.join(", "),
        if options.fast_math {
            FAST_MATH_SECTION
        } else if options.fma {
            FMA_SECTION
        } else {
            ""
        },
        call_args.join(", ")
    ))
}

/// `name` as an IR local name (quoted unless plain).
fn ir_name(name: &str, index: usize) -> String {
    if name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
    {
        name.to_string()
    } else {
        format!("arg{index}")
    }
}

fn ir_global(name: &str) -> String {
    if name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
    {
        format!("@{name}")
    } else {
        format!("@\"{name}\"")
    }
}

/// The options of the kernels of `module`'s text whose entries have an options section; a kernel
/// whose entry rustc merged into another's (an `alias`, see `entries`) has that one's.
fn kernel_options(module: &str) -> Vec<(String, EntryOptions)> {
    let mut found: Vec<(String, EntryOptions)> = module
        .lines()
        .filter(|l| l.starts_with("define "))
        .filter_map(|l| Some((entry_signature(l)?.0, options_section(l)?.2)))
        .collect();
    let aliased: Vec<(String, EntryOptions)> = module
        .lines()
        .filter_map(entry_alias)
        .filter_map(|(kernel, target)| Some((kernel, found.iter().find(|k| k.0 == target)?.1)))
        .collect();
    found.extend(aliased);
    found
}

/// `module`'s text with the code options of the functions whose options section names them (the
/// kernels, with their entries and everything else inlined), or of every function for `module`'s
/// options: LLVM's `contract` flag on every float multiply, add and subtract for `fma`, which
/// lets `llc` fuse them into FMAs; for `fast_math`, that and flush to zero on f32, `afn arcp` on
/// f32 divisions and `afn` on f32 square roots (`v_rcp_f32`, `v_sqrt_f32`, `v_rsq_f32`). Every
/// options section is dropped.
fn apply_code_options(module: &str, all: ModuleOptions) -> String {
    let mut out = String::with_capacity(module.len());
    let (mut in_fma, mut in_fast) = (false, false);
    for line in module.lines() {
        let section = options_section(line);
        if line.starts_with("define ") {
            let options = section.map(|(_, _, options)| options).unwrap_or_default();
            in_fast = all.fast_math || options.fast_math;
            in_fma = in_fast || options.fma;
        }
        let mut line = match section {
            Some((start, end, _)) => format!("{}{}", &line[..start], &line[end..]),
            None => line.to_string(),
        };
        if in_fast && line.starts_with("define ") && line.ends_with(" {") {
            line.insert_str(line.len() - 2, FLUSH_TO_ZERO);
        }
        let arithmetic = ["fmul", "fadd", "fsub"].iter().find_map(|op| {
            line.split_once(&format!(" = {op} "))
                .map(|split| (op, split))
        });
        let line = match arithmetic {
            Some((op, (result, operands))) if in_fma && line.starts_with("  %") => {
                format!("{result} = {op} contract {operands}")
            }
            _ if in_fast => approximate_f32(&line),
            _ => line,
        };
        out.push_str(&line);
        out.push('\n');
        if line.starts_with('}') {
            in_fma = false;
            in_fast = false;
        }
    }
    out
}

/// `line` with `afn arcp` on an f32 division and `afn` on a call of the f32 square root.
fn approximate_f32(line: &str) -> String {
    if let Some((result, operands)) = line.split_once(" = fdiv ") {
        let ty = operands.split_whitespace().find(|w| !is_fast_math_flag(w));
        if line.starts_with("  %") && ty == Some("float") {
            return format!("{result} = fdiv afn arcp {operands}");
        }
    }
    if let Some((head, call)) = line.split_once(" call ") {
        if call.starts_with("float @llvm.sqrt.f32(") {
            return format!("{head} call afn {call}");
        }
    }
    line.to_string()
}

/// Whether `word` is one of LLVM's fast-math flags.
fn is_fast_math_flag(word: &str) -> bool {
    [
        "fast", "nnan", "ninf", "nsz", "arcp", "contract", "afn", "reassoc",
    ]
    .contains(&word)
}

/// The glue module for `module`'s text and its entries, for `arch`.
fn glue(module: &str, entries: &[Entry], arch: &str) -> Result<String, String> {
    let mut out =
        String::from("; Written by offload-build: kernels, LDS and support for amdgcn.\n");
    for line in module.lines().filter(|l| l.starts_with("target ")) {
        out.push_str(line);
        out.push('\n');
    }
    out.push_str(&shared_arrays(module));
    out.push('\n');
    out.push_str(SUPPORT);
    let options = kernel_options(module);
    for e in entries {
        let of_entry = options.iter().find(|o| o.0 == e.kernel);
        out.push_str(&kernel_wrapper(
            e,
            of_entry.map_or_else(Default::default, |o| o.1),
            arch,
        )?);
    }
    Ok(out)
}

/// `error` (of `llc`) with the register caps of `module`'s kernels, if any: a cap below what a
/// kernel's code needs at one point makes LLVM's register allocator give up.
fn with_register_caps(error: String, module: &str) -> String {
    let caps: Vec<String> = kernel_options(module)
        .into_iter()
        .filter_map(|(kernel, o)| Some(format!("{kernel} = {}", o.max_registers?)))
        .collect();
    if caps.is_empty() {
        return error;
    }
    format!(
        "{error}\n(max_registers of {}: a cap below what a kernel needs at one point fails \
         here, in LLVM's register allocator)",
        caps.join(", ")
    )
}

fn run(tool: &Path, args: &[&OsStr], what: &str) -> Result<(), String> {
    let out = Command::new(tool)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", tool.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{what} failed ({}, {}):\n{}{}",
            tool.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        ));
    }
    Ok(())
}

/// Links `bitcode` for `arch` into the code object `output`, with intermediate files in `work`;
/// `module_options` are the `Kernels` settings that apply to every kernel. Returns the kernel
/// entries it wrapped.
pub fn link(
    tools: &Tools<'_>,
    bitcode: &Path,
    arch: &str,
    module_options: ModuleOptions,
    work: &Path,
    output: &Path,
) -> Result<Vec<Entry>, String> {
    let file = |name: &str| -> PathBuf { work.join(name) };
    let os = OsStr::new;
    let module_ll = file("kernels.ll");
    run(
        tools.llvm_link,
        &[
            os("-S"),
            bitcode.as_os_str(),
            os("-o"),
            module_ll.as_os_str(),
        ],
        "reading the device bitcode",
    )?;
    let module = fs::read_to_string(&module_ll)
        .map_err(|e| format!("cannot read {}: {e}", module_ll.display()))?;
    let entries = entries(&module)?;
    let glue_ll = file("glue.ll");
    fs::write(&glue_ll, glue(&module, &entries, arch)?)
        .map_err(|e| format!("cannot write {}: {e}", glue_ll.display()))?;
    let linked = file("linked.bc");
    run(
        tools.llvm_link,
        &[
            bitcode.as_os_str(),
            glue_ll.as_os_str(),
            os("-o"),
            linked.as_os_str(),
        ],
        "llvm-link of the kernel wrappers",
    )?;
    let exports: Vec<&str> = entries
        .iter()
        .map(|e| e.kernel.as_str())
        .chain(KEPT_GLOBALS)
        .collect();
    let optimized = file("opt.ll");
    let mcpu = format!("-mcpu={arch}");
    let keep = format!("--internalize-public-api-list={}", exports.join(","));
    run(
        tools.opt,
        &[
            os("-mtriple=amdgcn-amd-amdhsa"),
            os(&mcpu),
            os(&keep),
            os("-passes=internalize,default<O3>"),
            linked.as_os_str(),
            os("-S"),
            os("-o"),
            optimized.as_os_str(),
        ],
        "opt",
    )?;
    let contracted = file("contracted.ll");
    let optimized_text = fs::read_to_string(&optimized)
        .map_err(|e| format!("cannot read {}: {e}", optimized.display()))?;
    fs::write(
        &contracted,
        apply_code_options(&optimized_text, module_options),
    )
    .map_err(|e| format!("cannot write {}: {e}", contracted.display()))?;
    let object = file("kernels.o");
    run(
        tools.llc,
        &[
            os("-O3"),
            os("-mtriple=amdgcn-amd-amdhsa"),
            os(&mcpu),
            os("--amdhsa-code-object-version=5"),
            os(
                if module_options.fma_contraction || module_options.fast_math {
                    "-fp-contract=fast"
                } else {
                    "-fp-contract=off"
                },
            ),
            os("-filetype=obj"),
            contracted.as_os_str(),
            os("-o"),
            object.as_os_str(),
        ],
        "llc",
    )
    .map_err(|e| with_register_caps(e, &module))?;
    run(
        tools.lld,
        &[
            os("--no-undefined"),
            os("-shared"),
            object.as_os_str(),
            os("-o"),
            output.as_os_str(),
        ],
        "ld.lld",
    )?;
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODULE: &str = r#"target datalayout = "e-m:e-p:64:64"
target triple = "amdgcn-amd-amdhsa"

@"__offload_shared_k::block_17_21" = external local_unnamed_addr addrspace(1) global [12 x i8]
@__offload_shared_k_3_9 = external addrspace(1) global [4096 x i8], align 1
@OFFLOAD_PANIC_RECORD = global [296 x i8] zeroinitializer, align 4

define void @__offload_amdgpu_saxpy(ptr noalias noundef readonly align 4 captures(none) dereferenceable(4) %a, ptr noalias noundef readonly align 8 captures(address, read_provenance) dereferenceable(8) %x__ptr, ptr noalias noundef readonly align 8 dereferenceable(8) %x__len) unnamed_addr #0 {
start:
  ret void
}
define dso_local void @"__offload_amdgpu_odd"(ptr noalias noundef nonnull readonly %unit, ptr noundef readonly align 4 dereferenceable(12) %0, ptr noalias noundef readonly captures(none) dereferenceable(1) %flag) #0 {
  ret void
}
define internal void @helper(i32 %x) {
  ret void
}
@__offload_amdgpu_saxpy_again = unnamed_addr alias void (ptr, ptr, ptr), ptr @__offload_amdgpu_saxpy
@other_alias = alias void (i32), ptr @helper
"#;

    #[test]
    fn finds_entries_with_sizes_alignments_and_names() {
        let found = entries(MODULE).unwrap();
        let slot = |name: &str, size, align| ParamSlot {
            name: name.into(),
            size,
            align,
        };
        assert_eq!(
            found,
            [
                Entry {
                    kernel: "saxpy".into(),
                    params: vec![slot("a", 4, 4), slot("x__ptr", 8, 8), slot("x__len", 8, 8)],
                },
                Entry {
                    kernel: "odd".into(),
                    params: vec![slot("unit", 0, 1), slot("arg1", 12, 4), slot("flag", 1, 1)],
                },
                // Merged by rustc into saxpy's entry: the same parameters.
                Entry {
                    kernel: "saxpy_again".into(),
                    params: vec![slot("a", 4, 4), slot("x__ptr", 8, 8), slot("x__len", 8, 8)],
                },
            ]
        );
    }

    #[test]
    fn an_alias_of_no_entry_is_refused() {
        let e = entries("@__offload_amdgpu_k = alias void (), ptr @__offload_amdgpu_gone\n")
            .unwrap_err();
        assert!(
            e.contains("entry of kernel k: an alias of gone, which is no entry"),
            "{e}"
        );
    }

    #[test]
    fn an_unreadable_alignment_is_refused() {
        let e = entries("define void @__offload_amdgpu_k(ptr align x %a) {\n").unwrap_err();
        assert!(e.contains("unreadable alignment"), "{e}");
    }

    #[test]
    fn a_value_parameter_is_refused() {
        let e = entries("define void @__offload_amdgpu_k(i32 %x) {\n").unwrap_err();
        assert!(
            e.contains("entry of kernel k: parameter 0 is `i32 %x`"),
            "{e}"
        );
    }

    #[test]
    fn glue_defines_wrappers_lds_and_support() {
        let g = glue(MODULE, &entries(MODULE).unwrap(), "gfx942").unwrap();
        assert!(g.contains("target triple = \"amdgcn-amd-amdhsa\"\n"));
        assert!(g.contains("declare void @__offload_amdgpu_saxpy(ptr, ptr, ptr)\n"));
        assert!(g.contains(
            "@\"__offload_lds_k::block_17_21\" = internal addrspace(3) global [16 x i8] undef, \
             align 16\ndefine ptr @\"__offload_shared_k::block_17_21_address\"(ptr %size) \
             alwaysinline {\n  ret ptr addrspacecast (ptr addrspace(3) @\"__offload_lds_k::block_17_21\" to ptr)\n}"
        ));
        assert!(g.contains(
            "@__offload_lds_k_3_9 = internal addrspace(3) global [4096 x i8] undef, align 16"
        ));
        assert!(g.contains(
            "define amdgpu_kernel void @saxpy(ptr addrspace(4) noundef byref([4 x i8]) align 4 %a, \
             ptr addrspace(4) noundef byref([8 x i8]) align 8 %x__ptr, ptr addrspace(4) noundef \
             byref([8 x i8]) align 8 %x__len) {\n  %a.flat = addrspacecast ptr addrspace(4) %a to ptr\n"
        ));
        assert!(g.contains("  call void @__offload_amdgpu_saxpy(ptr %a.flat, ptr %x__ptr.flat, ptr %x__len.flat) alwaysinline\n"));
        assert!(g.contains(
            "define amdgpu_kernel void @odd(ptr addrspace(4) noundef byref([12 x i8]) align 4 %arg1, \
             ptr addrspace(4) noundef byref([1 x i8]) align 1 %flag)"
        ));
        assert!(g.contains(
            "call void @__offload_amdgpu_odd(ptr inttoptr (i64 1 to ptr), ptr %arg1.flat, ptr %flag.flat)"
        ));
        assert!(g.contains("define void @__offload_amdgpu_sync_threads() alwaysinline"));
    }

    #[test]
    fn fma_kernels_get_contract_flags_and_lose_the_section() {
        let module = "define void @__offload_amdgpu_fused(ptr align 4 dereferenceable(4) %a) unnamed_addr #0 section \".offload.fma\" {\n  ret void\n}\n\
                      define void @__offload_amdgpu_plain(ptr align 4 dereferenceable(4) %a) unnamed_addr #0 {\n  ret void\n}\n\
                      define void @__offload_amdgpu_capped(ptr align 4 dereferenceable(4) %a) unnamed_addr #0 section \".offload.maxnreg24\" {\n  ret void\n}\n\
                      define void @__offload_amdgpu_both(ptr align 4 dereferenceable(4) %a) unnamed_addr #0 section \".offload.fma.maxnreg24\" {\n  ret void\n}\n";
        let g = glue(module, &entries(module).unwrap(), "gfx1100").unwrap();
        assert!(g.contains(
            "define amdgpu_kernel void @fused(ptr addrspace(4) noundef byref([4 x i8]) align 4 %a) section \".offload.fma\" {"
        ));
        assert!(g.contains(
            "define amdgpu_kernel void @plain(ptr addrspace(4) noundef byref([4 x i8]) align 4 %a) {"
        ));

        let optimized = "define amdgpu_kernel void @fused(ptr %a) section \".offload.fma\" {\n\
                         \x20 %m = fmul float %x, %y\n\
                         \x20 %s = fadd nnan float %m, %z\n\
                         \x20 %d = fsub <2 x float> %u, %v\n\
                         \x20 %n = fneg float %s\n\
                         }\n\
                         define amdgpu_kernel void @plain(ptr %a) {\n\
                         \x20 %m = fmul float %x, %y\n\
                         }\n\
                         define void @__offload_amdgpu_capped(ptr %a) unnamed_addr #0 section \".offload.maxnreg24\" {\n\
                         \x20 %m = fmul float %x, %y\n\
                         }\n";
        assert_eq!(
            apply_code_options(optimized, ModuleOptions::default()),
            "define amdgpu_kernel void @fused(ptr %a) {\n\
             \x20 %m = fmul contract float %x, %y\n\
             \x20 %s = fadd contract nnan float %m, %z\n\
             \x20 %d = fsub contract <2 x float> %u, %v\n\
             \x20 %n = fneg float %s\n\
             }\n\
             define amdgpu_kernel void @plain(ptr %a) {\n\
             \x20 %m = fmul float %x, %y\n\
             }\n\
             define void @__offload_amdgpu_capped(ptr %a) unnamed_addr #0 {\n\
             \x20 %m = fmul float %x, %y\n\
             }\n"
        );
    }

    /// A `fastmath` kernel's wrapper sits in the fast-math section; after inlining it gets
    /// contraction, flush to zero and approximate f32 division and square roots, and no other
    /// function does, unless the module is fast math as a whole.
    #[test]
    fn fast_math_kernels_get_approximations_and_flush_to_zero() {
        let module = "define void @__offload_amdgpu_quick(ptr align 4 dereferenceable(4) %a) unnamed_addr #0 section \".offload.fastmath.maxnreg64\" {\n  ret void\n}\n";
        let g = glue(module, &entries(module).unwrap(), "gfx1100").unwrap();
        assert!(g.contains(
            "define amdgpu_kernel void @quick(ptr addrspace(4) noundef byref([4 x i8]) align 4 %a) \"amdgpu-num-vgpr\"=\"64\" section \".offload.fma.fastmath\" {"
        ), "{g}");

        let body = "\x20 %m = fmul float %x, %y\n\
                    \x20 %q = fdiv float %m, %z\n\
                    \x20 %r = fdiv contract float 1.0, %q\n\
                    \x20 %w = fdiv double %u, %v\n\
                    \x20 %s = tail call float @llvm.sqrt.f32(float %q)\n\
                    \x20 %t = tail call double @llvm.sqrt.f64(double %w)\n\
                    }\n";
        let optimized = format!(
            "define amdgpu_kernel void @quick(ptr %a) #1 section \".offload.fma.fastmath\" {{\n{body}\
             define amdgpu_kernel void @plain(ptr %a) #1 {{\n{body}"
        );
        let fast_body = "\x20 %m = fmul contract float %x, %y\n\
                         \x20 %q = fdiv afn arcp float %m, %z\n\
                         \x20 %r = fdiv afn arcp contract float 1.0, %q\n\
                         \x20 %w = fdiv double %u, %v\n\
                         \x20 %s = tail call afn float @llvm.sqrt.f32(float %q)\n\
                         \x20 %t = tail call double @llvm.sqrt.f64(double %w)\n\
                         }\n";
        let ftz = "\"denormal-fp-math-f32\"=\"preserve-sign,preserve-sign\"";
        assert_eq!(
            apply_code_options(&optimized, ModuleOptions::default()),
            format!(
                "define amdgpu_kernel void @quick(ptr %a) #1 {ftz} {{\n{fast_body}\
                 define amdgpu_kernel void @plain(ptr %a) #1 {{\n{body}"
            )
        );
        let everywhere = ModuleOptions {
            fma_contraction: false,
            fast_math: true,
        };
        assert_eq!(
            apply_code_options(&optimized, everywhere),
            format!(
                "define amdgpu_kernel void @quick(ptr %a) #1 {ftz} {{\n{fast_body}\
                 define amdgpu_kernel void @plain(ptr %a) #1 {ftz} {{\n{fast_body}"
            )
        );
    }

    /// `maxnreg<N>` puts `"amdgpu-num-vgpr"` on that kernel's wrapper and no other, halved where
    /// LLVM counts the budget in pairs (gfx942), as is elsewhere (gfx1100); a kernel whose entry
    /// is an alias of a capped one is capped alike, and a cap LLVM cannot express is refused.
    #[test]
    fn register_caps_become_the_wrappers_vgpr_budget() {
        let module = "define void @__offload_amdgpu_plain(ptr align 4 dereferenceable(4) %a) unnamed_addr #0 {\n  ret void\n}\n\
                      define void @__offload_amdgpu_capped(ptr align 4 dereferenceable(4) %a) unnamed_addr #0 section \".offload.maxnreg25\" {\n  ret void\n}\n\
                      define void @__offload_amdgpu_both(ptr align 4 dereferenceable(4) %a) unnamed_addr #0 section \".offload.fma.maxnreg40\" {\n  ret void\n}\n\
                      @__offload_amdgpu_capped_again = unnamed_addr alias void (ptr), ptr @__offload_amdgpu_capped\n";
        let wrapper = |kernel: &str, tail: &str| {
            format!("define amdgpu_kernel void @{kernel}(ptr addrspace(4) noundef byref([4 x i8]) align 4 %a){tail} {{\n")
        };
        let found = entries(module).unwrap();
        let gfx942 = glue(module, &found, "gfx942").unwrap();
        assert!(gfx942.contains(&wrapper("plain", "")), "{gfx942}");
        assert!(gfx942.contains(&wrapper("capped", " \"amdgpu-num-vgpr\"=\"12\"")));
        assert!(gfx942.contains(&wrapper("capped_again", " \"amdgpu-num-vgpr\"=\"12\"")));
        assert!(gfx942.contains(&wrapper(
            "both",
            " \"amdgpu-num-vgpr\"=\"20\" section \".offload.fma\""
        )));
        assert_eq!(gfx942.matches("amdgpu-num-vgpr").count(), 3);
        let gfx1100 = glue(module, &found, "gfx1100").unwrap();
        assert!(gfx1100.contains(&wrapper("capped", " \"amdgpu-num-vgpr\"=\"25\"")));
        assert!(gfx1100.contains(&wrapper(
            "both",
            " \"amdgpu-num-vgpr\"=\"40\" section \".offload.fma\""
        )));

        let one = "define void @__offload_amdgpu_tiny(ptr align 4 dereferenceable(4) %a) section \".offload.maxnreg1\" {\n";
        let e = glue(one, &entries(one).unwrap(), "gfx90a").unwrap_err();
        assert_eq!(
            e,
            "kernel tiny: max_registers = 1 cannot be met on gfx90a: LLVM caps its vector \
             registers in pairs (ask for 2 or more)"
        );
        assert!(glue(one, &entries(one).unwrap(), "gfx1100").is_ok());

        assert_eq!(
            with_register_caps("llc failed\n".into(), module),
            "llc failed\n\n(max_registers of capped = 25, both = 40, capped_again = 25: a cap \
             below what a kernel needs at one point fails here, in LLVM's register allocator)"
        );
        assert_eq!(
            with_register_caps("llc failed\n".into(), MODULE),
            "llc failed\n"
        );
    }
}
