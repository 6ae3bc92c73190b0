//! Which kernels' GPU threads never wait for one another, read from the kernel's PTX image: no
//! barrier, no warp-wide operation (shuffle, vote, `mma`, …), no shared memory, in the entry or
//! in any function it calls. The host backend runs such kernels' threads as plain calls, without
//! the block model (see `plugins::host`).
//!
//! The PTX is the kernel as compiled, after inlining: a barrier reached through a helper
//! function shows in it, which the kernel attribute, seeing only the kernel's own body, could
//! not know. Without a PTX image (no device toolchain) no kernel counts as independent.

use crate::plugins::image::{ImageFormat, ImageSet};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// Instruction prefixes of block- and warp-level operations: barriers, warp collectives, tensor
/// cores (warp-wide), asynchronous copies into shared memory.
const BLOCK_LEVEL: &[&str] = &[
    "bar.",
    "barrier.",
    "shfl.",
    "vote.",
    "match.",
    "redux.",
    "activemask",
    "elect.",
    "mma.",
    "wmma.",
    "wgmma.",
    "ldmatrix.",
    "stmatrix.",
    "movmatrix.",
    "cp.async",
    "mbarrier.",
];

/// Functions outside the image that a kernel may call and that wait for no other thread.
const INDEPENDENT_EXTERNALS: &[&str] = &["vprintf", "__assertfail", "malloc", "free"];

/// Whether the threads of entry `entry` in `images` never wait for one another (see the module
/// doc). `false` without a PTX image holding the entry.
pub(crate) fn threads_independent(images: &ImageSet, entry: &str) -> bool {
    let Some(ptx) = images.images.iter().find(|i| i.format == ImageFormat::Ptx) else {
        return false;
    };
    static SCANNED: OnceLock<Mutex<HashMap<usize, Arc<HashSet<String>>>>> = OnceLock::new();
    let key = ptx.bytes.as_ptr() as usize;
    let cached = SCANNED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
        .cloned();
    let independent = cached.unwrap_or_else(|| {
        let found = Arc::new(independent_entries(&String::from_utf8_lossy(ptx.bytes)));
        SCANNED
            .get()
            .expect("initialised above")
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, found.clone());
        found
    });
    independent.contains(entry)
}

/// One function of a PTX module: its name, whether it is an entry, and its body (empty for a
/// declaration of a function defined elsewhere).
struct Function<'a> {
    name: &'a str,
    entry: bool,
    body: &'a str,
    defined: bool,
}

/// The entries of `ptx` whose threads never wait for one another.
fn independent_entries(ptx: &str) -> HashSet<String> {
    let (mut functions, shared_variables) = parse(ptx);
    // Drop forward declarations of functions the module defines.
    let defined: HashSet<&str> = functions
        .iter()
        .filter(|f| f.defined)
        .map(|f| f.name)
        .collect();
    functions.retain(|f| f.defined || !defined.contains(f.name));
    let by_name: HashMap<&str, &Function> = functions.iter().map(|f| (f.name, f)).collect();
    // Each function's own block-level use, and the functions it names (calls).
    let mut own_use: HashMap<&str, bool> = HashMap::new();
    let mut callees: HashMap<&str, Vec<&str>> = HashMap::new();
    for f in &functions {
        let uses = if f.defined {
            uses_block_level(f.body, &shared_variables)
        } else {
            !INDEPENDENT_EXTERNALS.contains(&f.name)
        };
        own_use.insert(f.name, uses);
        let called = identifiers(f.body)
            .filter(|id| *id != f.name && by_name.contains_key(id))
            .collect();
        callees.insert(f.name, called);
    }
    functions
        .iter()
        .filter(|f| f.entry && f.defined)
        .filter(|f| !reaches_block_level(f.name, &own_use, &callees))
        .map(|f| f.name.to_string())
        .collect()
}

/// Whether `start` or any function it calls, transitively, uses a block-level operation.
fn reaches_block_level(
    start: &str,
    own_use: &HashMap<&str, bool>,
    callees: &HashMap<&str, Vec<&str>>,
) -> bool {
    let mut seen = HashSet::from([start]);
    let mut pending = vec![start];
    while let Some(f) = pending.pop() {
        if own_use.get(f).copied().unwrap_or(true) {
            return true;
        }
        for &callee in callees.get(f).into_iter().flatten() {
            if seen.insert(callee) {
                pending.push(callee);
            }
        }
    }
    false
}

/// Whether a function body uses a block-level instruction, any `.shared` state space, a
/// module-level shared variable, or calls through a pointer (a callee it cannot name).
fn uses_block_level(body: &str, shared_variables: &HashSet<&str>) -> bool {
    let block_level_instruction = |line: &str| {
        let mut instruction = line.trim_start();
        // A predicated instruction reads `@%p1 bar.sync 0;`: skip the guard.
        if instruction.starts_with('@') {
            instruction = instruction
                .split_once(char::is_whitespace)
                .map_or("", |(_, rest)| rest.trim_start());
        }
        BLOCK_LEVEL.iter().any(|p| instruction.starts_with(p))
    };
    body.contains(".shared")
        || body.contains(".callprototype")
        || body.lines().any(block_level_instruction)
        || identifiers(body).any(|id| shared_variables.contains(id))
}

/// The identifiers of PTX text (names may hold `$`).
fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
        .filter(|s| s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_' || c == '$'))
}

/// The functions of `ptx` and the names of its module-level `.shared` variables.
fn parse(ptx: &str) -> (Vec<Function<'_>>, HashSet<&str>) {
    let mut functions = Vec::new();
    let mut shared_variables = HashSet::new();
    let mut rest = ptx;
    let mut offset = 0;
    while !rest.is_empty() {
        // One top-level statement: up to `;` (a declaration) or a `{ … }` body.
        let Some(end) = rest.find([';', '{']) else {
            break;
        };
        let raw_header = &rest[..end];
        let header = strip_comments(raw_header);
        let (body, consumed) = if rest.as_bytes()[end] == b'{' {
            let close = matching_brace(&rest[end..]).map_or(rest.len(), |c| end + c + 1);
            (&rest[end..close], close)
        } else {
            ("", end + 1)
        };
        let words: Vec<&str> = header.split_whitespace().collect();
        if words.contains(&".shared") {
            if let Some(name) = words.last().and_then(|w| identifiers(w).next()) {
                shared_variables.insert(in_text(raw_header, name));
            }
        } else if let Some(kind) = words.iter().position(|w| *w == ".entry" || *w == ".func") {
            if let Some(name) = function_name(&header, words[kind]) {
                functions.push(Function {
                    name: in_text(raw_header, name),
                    entry: words[kind] == ".entry",
                    body,
                    defined: rest.as_bytes()[end] == b'{',
                });
            }
        }
        offset += consumed;
        rest = &ptx[offset..];
    }
    (functions, shared_variables)
}

/// `part` (found in a copy of `text`) as a slice of `text` itself.
fn in_text<'a>(text: &'a str, part: &str) -> &'a str {
    text.find(part).map_or("", |at| &text[at..at + part.len()])
}

/// The name in a function header: the first identifier after `.entry`, or after `.func` and
/// its optional return parameter list `(.param .b32 func_retval0)`.
fn function_name<'a>(header: &'a str, keyword: &str) -> Option<&'a str> {
    let after = header[header.find(keyword)? + keyword.len()..].trim_start();
    let after = if after.starts_with('(') {
        &after[after.find(')')? + 1..]
    } else {
        after
    };
    identifiers(after).next()
}

/// `text` without its `//` comments (a function header may carry some on each line).
fn strip_comments(text: &str) -> String {
    text.lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The index of the `}` closing the `{` at the start of `text`.
fn matching_brace(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = r#"
//
// Generated by LLVM NVPTX Back-End
//
.version 8.7
.target sm_90
.address_size 64

.extern .func vprintf(
	.param .b64 vprintf_param_0
);
.extern .func mystery(
	.param .b64 mystery_param_0
);
.shared .align 16 .b8 tile_$_1[1024];
.visible .global .align 4 .b8 OFFLOAD_PANIC_RECORD[296];

.func  (.param .b32 func_retval0) sum_warp(
	.param .b32 sum_warp_param_0
)
{
	.reg .b32 	%r<3>;
	shfl.sync.bfly.b32	%r2, %r1, 16, 31, -1;
	st.param.b32 	[func_retval0], %r2;
	ret;
}
.func panic_helper(
	.param .b64 panic_helper_param_0
)
.noreturn
{
	{ // callseq 0, 0
	call.uni vprintf, (param0);
	} // callseq 0
	trap;
}
	// .globl	saxpy
.visible .entry saxpy(
	.param .f32 saxpy_param_0
)
{
	@%p1 bra 	$L__BB0_2;
	ld.global.nc.b32 	%r1, [%rd1];
	{ // callseq 1, 0
	call.uni panic_helper, (param0);
	} // callseq 1
	atom.global.add.u32 	%r3, [%rd2], 1;
	ret;
}
.visible .entry reduce(
	.param .u64 reduce_param_0
)
{
	{ // callseq 2, 0
	call.uni (retval0), sum_warp, (param0);
	} // callseq 2
	ret;
}
.visible .entry barrier(
	.param .u64 barrier_param_0
)
{
	@%p2 barrier.sync 	0;
	ret;
}
.visible .entry tiled(
	.param .u64 tiled_param_0
)
{
	mov.u64 	%rd1, tile_$_1;
	ret;
}
.visible .entry dynamic(
	.param .u64 dynamic_param_0
)
{
	ld.shared.b32 	%r1, [%rd1];
	ret;
}
.visible .entry external(
	.param .u64 external_param_0
)
{
	call.uni mystery, (param0);
	ret;
}
"#;

    #[test]
    fn only_entries_reaching_no_block_level_operation_are_independent() {
        let independent = independent_entries(PTX);
        assert_eq!(independent, HashSet::from(["saxpy".to_string()]));
    }

    #[test]
    fn functions_and_shared_variables_are_found() {
        let (functions, shared) = parse(PTX);
        let names: Vec<(&str, bool, bool)> = functions
            .iter()
            .map(|f| (f.name, f.entry, f.defined))
            .collect();
        assert_eq!(
            names,
            [
                ("vprintf", false, false),
                ("mystery", false, false),
                ("sum_warp", false, true),
                ("panic_helper", false, true),
                ("saxpy", true, true),
                ("reduce", true, true),
                ("barrier", true, true),
                ("tiled", true, true),
                ("dynamic", true, true),
                ("external", true, true),
            ]
        );
        assert_eq!(shared, HashSet::from(["tile_$_1"]));
    }
}
