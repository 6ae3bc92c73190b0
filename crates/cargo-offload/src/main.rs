//! `cargo offload SUBCOMMAND`: see `cargo offload help`.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut out = std::io::stdout().lock();
    std::process::exit(cargo_offload::run(&args, &mut out));
}
