//! The `gatehouse` binary: parse, call the library, print. See `cli/`.

mod cli;

fn main() {
    std::process::exit(cli::main());
}
