//! Field-for-field conversions between consensus's view of durable state and
//! partition storage's (the partition crate does not depend on consensus).

use strand_consensus::{DurableState, HistoryStart, Recovered, WriteStage};
use strand_partition::recovery::Recovery;
use strand_partition::superblock::{self, DurableFields};

/// Consensus's state as the superblock stores it.
///
/// What a superblock read back refuses is never written: the starts within
/// their bound and ascending by view, the view headers within theirs.
pub fn fields_of(state: &DurableState) -> DurableFields {
    let starts = &state.history_starts;
    assert!(
        starts.len() <= superblock::HISTORY_STARTS_MAX,
        "{} history starts to persist",
        starts.len()
    );
    assert!(
        starts.windows(2).all(|pair| pair[0].view < pair[1].view),
        "history starts to persist out of view order: {starts:?}"
    );
    assert!(
        state.view_headers.len() <= superblock::VIEW_HEADERS_MAX,
        "{} view headers to persist",
        state.view_headers.len()
    );
    DurableFields {
        view: state.view,
        log_view: state.log_view,
        commit: state.commit,
        history_starts: state
            .history_starts
            .iter()
            .map(|start| superblock::HistoryStart {
                view: start.view,
                op: start.op,
                cursor_tail: start.cursor_tail,
                replica: start.replica,
                accepted_loss: start.accepted_loss,
                offset_end: start.offset_end,
                checksum: start.checksum,
            })
            .collect(),
        view_headers: state.view_headers.clone(),
        maybe_acked_op: state.maybe_acked_op,
        log_unsettled: state.log_unsettled,
        client_table: state.client_table.clone(),
    }
}

/// The superblock's fields as consensus's state.
pub fn state_of(fields: &DurableFields) -> DurableState {
    DurableState {
        view: fields.view,
        log_view: fields.log_view,
        commit: fields.commit,
        history_starts: fields
            .history_starts
            .iter()
            .map(|start| HistoryStart {
                view: start.view,
                op: start.op,
                cursor_tail: start.cursor_tail,
                replica: start.replica,
                accepted_loss: start.accepted_loss,
                offset_end: start.offset_end,
                checksum: start.checksum,
            })
            .collect(),
        view_headers: fields.view_headers.clone(),
        maybe_acked_op: fields.maybe_acked_op,
        log_unsettled: fields.log_unsettled,
        client_table: readable_client_table(&fields.client_table),
    }
}

/// `encoded` if consensus can read it as a client table, else empty (the
/// table is then rebuilt from the log's headers, as before tables were
/// persisted), said in the log.
pub fn readable_client_table(encoded: &bytes::Bytes) -> bytes::Bytes {
    if encoded.is_empty() {
        return bytes::Bytes::new();
    }
    match strand_consensus::client_table::ClientTable::decode(encoded) {
        Ok(_) => encoded.clone(),
        Err(error) => {
            tracing::warn!(%error, "host: the recorded client table is unreadable; rebuilding it from the log");
            bytes::Bytes::new()
        }
    }
}

/// What consensus needs to open, from what the partition found.
pub fn recovered_of(recovery: &Recovery) -> Recovered {
    Recovered {
        state: state_of(&recovery.durable),
        headers: recovery.headers.clone(),
        faulty: recovery.faulty.clone(),
        log_head: recovery.op,
        cursor_tail: recovery.cursor_tail,
        trusted: recovery.log_trusted(),
        awaiting_state_transfer: recovery.awaiting_state_transfer,
        fresh: recovery.fresh,
        stopped_in_view: recovery.recovered_from_disk && recovery.stopped_in_view,
        joined_epoch: 0,
        log_start: recovery.head_op.max(1),
        log_start_offset: recovery.head_offset,
    }
}

/// A storage write stage as consensus names it.
pub fn stage_of(stage: strand_partition::WriteStage) -> WriteStage {
    match stage {
        strand_partition::WriteStage::Queued => WriteStage::Queued,
        strand_partition::WriteStage::Durable => WriteStage::Durable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durable_state_survives_the_round_trip() {
        let state = DurableState {
            view: strand_wire::ViewId::new(1, 7),
            log_view: strand_wire::ViewId::new(1, 6),
            commit: 99,
            history_starts: vec![HistoryStart {
                view: strand_wire::ViewId::new(1, 6),
                op: 90,
                cursor_tail: 3,
                replica: 2,
                accepted_loss: true,
                offset_end: Some(880),
                checksum: Some(0xfeed),
            }],
            view_headers: Vec::new(),
            maybe_acked_op: 101,
            log_unsettled: true,
            client_table: bytes::Bytes::new(),
        };
        let back = state_of(&fields_of(&state));
        assert_eq!(back, state);
        // A start's equality leaves its record offset and head checksum
        // out: checked apart.
        assert_eq!(back.history_starts[0].offset_end, Some(880));
        assert_eq!(back.history_starts[0].checksum, Some(0xfeed));
    }
}
