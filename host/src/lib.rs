//! # strand-host: one replicated group on one node
//!
//! The layer between the pure replica (`strand-consensus`) and what hosts
//! it (the server's group actors, the simulator): deterministic, with no
//! threads, sockets or clocks. It owns the rules that both sides must
//! apply the same way, each in one place.
//!
//! Modules, in reading order:
//!
//! | module | owns |
//! |---|---|
//! | [`convert`] | consensus's durable state ⇄ the partition's superblock fields, the trust of a recovered log |
//! | [`group_host`] | `GroupHost`, the one door into a group: opening it (trust, a newcomer's placement, the catalog replayed); every input through its methods (`inputs`: start, requests, assignments, retirement, accepted loss) and every effect carried out here; reads under the committed-only rule and the replica's progress (`reads`); the simulator's read-only look inside behind the `inspect` feature; cursor stores and deletes (the door to the bound on consumer names); retention and cursor compaction when the owner asks; the metadata log's compaction (`catalog_log`: catalog snapshots, the log below the older one dropped, the catalog rebuilt after a transfer); both ends of state transfer; outputs for the owner |
//! | [`reassign`] | **pure**: planning a reassignment: stable slots, in place or by view change |
//! | [`move_safety`] | **pure**: whether a reassignment or a drop of a retired copy could lose confirmed records, judged from the primary's status |
//! | [`catalog`] | the metadata plane's state machine: streams, topics, placements, epochs; their bounds per cluster (`catalog_limits`); its own rules, asserted after every op (`catalog_invariants`) |
//! | [`consumer_groups`] | the catalog's consumer groups: members, generations, the sticky assignment, offset fences |
//! | [`users`] | the catalog's users and access tokens: hashes, permissions, expiry |
//! | [`quotas`] | the catalog's quotas: each user's produce, fetch and request rates |
//! | [`catalog_image`] | the whole catalog as bytes, for compacting the metadata log: deterministic, every field; decoding refuses any catalog the catalog's rules would not build |
//! | [`machine`] | a group's state machine: the catalog (group 0) or a record log; the catalog rebuilt at open from its newest usable snapshot and the log after it (below a damaged committed entry, which consensus repairs) |
//! | [`transfer`] | **pure**: the receiving side of a state transfer: source, chunks, stalls |
//! | [`ticks`] | **pure**: when each of a driver's groups next needs a tick; the ticks between skipped |
//!
//! Invariants that matter most:
//! - Every replica applies the same committed ops to the catalog in the same
//!   order and reaches the same catalog: nothing here reads a clock, a
//!   random number or a hash map's iteration order.
//! - A staying replica keeps its slot across reassignments; a slot names one
//!   node in every epoch a replica may still remember.

pub mod catalog;
pub mod catalog_image;
mod catalog_invariants;
mod catalog_limits;
pub mod consumer_groups;
pub mod convert;
pub mod group_host;
pub mod machine;
pub mod move_safety;
pub mod quotas;
pub mod reassign;
pub mod ticks;
pub mod transfer;
pub mod users;
