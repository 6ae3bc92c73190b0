//! The packed parameter buffer `olLaunchKernel` takes: the kernel's parameters laid out as a C
//! struct of them (each at the next offset aligned for its type, the whole rounded up to the
//! largest alignment), which liboffload hands to the driver as is (CUDA's parameter buffer, the
//! AMDGPU kernarg segment).

use crate::backend::Param;
use std::mem::size_of;

/// The buffer for `params`.
pub fn pack(params: &[Param]) -> Vec<u8> {
    let mut buffer: Vec<u8> = Vec::with_capacity(params.len() * size_of::<u64>());
    let mut struct_align = 1;
    for param in params {
        let (bytes, align): (&[u8], usize) = match param {
            Param::Value { ptr, size, align } => {
                // SAFETY: the launch's caller keeps the value alive for the call and it is
                // `size` bytes long (`Param`'s contract).
                let bytes = unsafe { std::slice::from_raw_parts(*ptr, *size) };
                (bytes, *align)
            }
            Param::Word(word) => (word_bytes(word), size_of::<u64>()),
        };
        struct_align = struct_align.max(align);
        buffer.resize(buffer.len().next_multiple_of(align), 0);
        buffer.extend_from_slice(bytes);
    }
    buffer.resize(buffer.len().next_multiple_of(struct_align), 0);
    buffer
}

fn word_bytes(word: &u64) -> &[u8] {
    // SAFETY: a u64 is 8 initialised bytes, borrowed as long as `word`.
    unsafe { std::slice::from_raw_parts(word as *const u64 as *const u8, size_of::<u64>()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value<T>(v: &T) -> Param {
        Param::Value {
            ptr: v as *const T as *const u8,
            size: size_of::<T>(),
            align: std::mem::align_of::<T>(),
        }
    }

    #[test]
    fn lays_parameters_out_as_a_c_struct() {
        // saxpy(a: f32, x: &[f32], y: &mut [f32]): a at 0, x's (ptr, len) at 8 and 16, ...
        let a = 2.5f32;
        let buffer = pack(&[
            value(&a),
            Param::Word(0x1000),
            Param::Word(7),
            Param::Word(0x2000),
            Param::Word(9),
        ]);
        assert_eq!(buffer.len(), 40);
        assert_eq!(&buffer[0..4], &a.to_ne_bytes());
        assert_eq!(&buffer[4..8], &[0; 4]);
        assert_eq!(&buffer[8..16], &0x1000u64.to_ne_bytes());
        assert_eq!(&buffer[32..40], &9u64.to_ne_bytes());
    }

    #[test]
    fn small_values_pack_together_and_the_end_is_padded_to_the_largest_alignment() {
        #[repr(C)]
        struct Grid {
            width: u32,
            height: u32,
            centre: f32,
        }
        let (b, g, c) = (
            1u8,
            Grid {
                width: 3,
                height: 4,
                centre: 0.5,
            },
            6u16,
        );
        let buffer = pack(&[value(&b), value(&g), value(&c), Param::Word(5), value(&b)]);
        // u8 at 0, Grid (align 4) at 4..16, u16 at 16, word at 24, u8 at 32, padded to 40.
        assert_eq!(buffer.len(), 40);
        assert_eq!(buffer[0], 1);
        assert_eq!(&buffer[4..8], &3u32.to_ne_bytes());
        assert_eq!(&buffer[12..16], &0.5f32.to_ne_bytes());
        assert_eq!(&buffer[16..18], &6u16.to_ne_bytes());
        assert_eq!(&buffer[24..32], &5u64.to_ne_bytes());
        assert_eq!(buffer[32], 1);
    }

    #[test]
    fn no_parameters_is_an_empty_buffer() {
        assert!(pack(&[]).is_empty());
    }
}
