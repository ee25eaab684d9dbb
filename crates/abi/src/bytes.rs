/// A type whose every bit pattern is valid and which has no padding the
/// kernel could leak: safe to view as bytes and to build from bytes.
///
/// # Safety
/// Implement only for `#[repr(C)]`/packed structs of integers and byte arrays
/// whose size is checked against the C layout.
pub unsafe trait Plain: Copy + 'static {
    fn as_bytes(&self) -> &[u8] {
        // SAFETY: Plain types are plain old data of exactly size_of::<Self>().
        unsafe {
            std::slice::from_raw_parts(
                self as *const Self as *const u8,
                std::mem::size_of::<Self>(),
            )
        }
    }

    /// Reads a value from the start of `bytes`; `None` when too short.
    fn from_bytes(bytes: &[u8]) -> Option<Self> {
        if bytes.len() < std::mem::size_of::<Self>() {
            return None;
        }
        // SAFETY: length checked; every bit pattern is valid; read_unaligned
        // copes with any alignment of the source buffer.
        Some(unsafe { std::ptr::read_unaligned(bytes.as_ptr() as *const Self) })
    }

    fn zeroed() -> Self {
        // SAFETY: all-zero is a valid value of every Plain type.
        unsafe { std::mem::zeroed() }
    }
}

unsafe impl Plain for u8 {}
unsafe impl Plain for u16 {}
unsafe impl Plain for u32 {}
unsafe impl Plain for u64 {}

/// Asserts a struct's size and the offsets of the fields the kernel reads.
#[macro_export]
macro_rules! assert_layout {
    ($ty:ty, size = $size:expr $(, $field:ident = $off:expr)* $(,)?) => {
        const _: () = assert!(::std::mem::size_of::<$ty>() == $size);
        $( const _: () = assert!(::std::mem::offset_of!($ty, $field) == $off); )*
    };
}
