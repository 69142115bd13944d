//! `strand-disk-fault`: damages one file of a **stopped** node the way a
//! failing disk does, to see recovery handle it (see README, "Trying your
//! own disk faults").
//!
//! ```text
//! strand-disk-fault FILE flip-header|flip-payload|zero-block|truncate [--nth N]
//! strand-disk-fault FILE flip-byte --at BYTE       # an unframed file (an index)
//! ```
//!
//! `--nth N` aims at the Nth newest valid frame (0, the default: the last).

use std::path::PathBuf;
use std::process::ExitCode;

use strand_partition::faults::{Fault, damage_frame, flip_byte};

const USAGE: &str = "usage: strand-disk-fault FILE flip-header|flip-payload|zero-block|truncate|cut-at-frame \
                     [--nth N] | FILE flip-byte --at BYTE";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(done) => {
            println!("{done}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("strand-disk-fault: {error}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn run(args: &[String]) -> Result<String, String> {
    let [file, fault, rest @ ..] = args else {
        return Err("a file and a fault are needed".to_owned());
    };
    let path = PathBuf::from(file);
    let number = |flag: &str| -> Result<u64, String> {
        match rest {
            [] => Ok(0),
            [given, value] if given == flag => value
                .parse()
                .map_err(|_| format!("{flag} takes a number, not {value:?}")),
            _ => Err(format!("unexpected arguments: {rest:?}")),
        }
    };
    if fault == "flip-byte" {
        let at = number("--at")?;
        flip_byte(&path, at).map_err(|error| error.to_string())?;
        return Ok(format!("{}: flipped a bit of byte {at}", path.display()));
    }
    let fault = Fault::parse(fault).ok_or_else(|| format!("unknown fault {fault:?}"))?;
    let nth = number("--nth")? as usize;
    let damage = damage_frame(&path, nth, fault).map_err(|error| error.to_string())?;
    Ok(format!(
        "{}: {} of the frame at byte {} ({} payload bytes): bytes {}..{}",
        path.display(),
        fault.name(),
        damage.frame.offset,
        damage.frame.payload_len,
        damage.bytes.start,
        damage.bytes.end
    ))
}
