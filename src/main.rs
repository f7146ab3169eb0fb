//! The `vshortlink` binary: parses the command line and calls the library.

fn main() {
    eprintln!("vshortlink: the server arrives with the next change");
}
