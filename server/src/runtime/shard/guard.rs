//! A shard's calls into its groups' code, each under
//! [`crate::runtime::contain::catch`]: a panic fails that group alone.

use super::*;

impl Shard {
    /// Runs `work` on `group`'s actor, caught up on its skipped ticks, and
    /// marks it touched; a panic in it fails the group alone. Whether the
    /// group ran and lives.
    pub(super) fn run_group(&mut self, group: u64, work: impl FnOnce(&mut Actor)) -> bool {
        let Some(actor) = caught_up(&mut self.ticks, &mut self.actors, group) else {
            return false;
        };
        self.touched.push(group);
        match contain::catch(|| work(actor)) {
            Ok(()) => true,
            Err(message) => {
                self.fail(group, &message);
                false
            }
        }
    }

    /// Runs `work` on `group`'s actor as it stands (not marked touched); a
    /// panic in it fails the group alone. Whether the group ran and lives.
    pub(super) fn guarded(&mut self, group: u64, work: impl FnOnce(&mut Actor)) -> bool {
        let Some(actor) = self.actors.get_mut(&group) else {
            return false;
        };
        match contain::catch(|| work(actor)) {
            Ok(()) => true,
            Err(message) => {
                self.fail(group, &message);
                false
            }
        }
    }

    /// `group`'s code panicked: its actor is dropped without a clean mark,
    /// and the group waits to be opened again ([`crate::runtime::contain`]).
    pub(super) fn fail(&mut self, group: u64, message: &str) {
        let actor = self.remove_actor(group);
        self.storage_retries.forget(group);
        let (spec, wal, hosted) = actor.parts();
        if let Err(message) = contain::catch(move || drop(actor.abandon())) {
            tracing::error!(group, message, "group: dropping it panicked too");
        }
        let start = Start {
            spec: spec.clone(),
            wal,
            hosted,
        };
        self.failed.record(&self.shared, &spec, start, message);
    }

    /// Takes `input` for a group down here after a panic, if it is one: a
    /// request is answered (the other replicas serve), a stop forgets it,
    /// anything else is dropped. Whether the input was taken.
    pub(super) fn take_for_failed(&mut self, group: u64, input: &Input) -> bool {
        if !self.failed.contains(group) {
            return false;
        }
        match input {
            Input::Request(request) => {
                let header = request.header();
                let error = ErrorBody::message(
                    strand_wire::ResultCode::Unavailable,
                    "this node's copy of the partition stopped on a bug (see attention); its \
                     other replicas serve it: retry",
                );
                let _ = self
                    .shared
                    .reply(header.client.get(), error_frame(header, &error));
            }
            Input::Shutdown => {
                self.failed.forget(group);
                self.shared.vouching.restore(group);
                self.shared.unregister(group);
            }
            _ => {}
        }
        true
    }
}
