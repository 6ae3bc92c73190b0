//! Launch mistakes and unsound kernels are compile errors, with messages that say what is wrong.
#[test]
fn compile_fail() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
