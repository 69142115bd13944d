//! The client port: requests in, replies out.

use zerocopy::little_endian::{U16, U32, U64, U128};

use crate::command::Command;
use crate::header::{FieldError, command_header, ensure};
use crate::operation::{Operation, ResultCode};

command_header! {
    /// A client operation addressed to a group (`prefix.group`): a partition for
    /// produce, fetch and cursors, the metadata plane (group 0) for admin calls.
    ///
    /// `(client, request)` makes a request idempotent: a retry carries the same
    /// pair and is answered from the client table instead of being appended again.
    RequestHeader => Command::Request;
    /// The client's id, chosen at random by the client; never 0.
    client: U128,
    /// The client's request number, counting from 1 per client.
    request: U64,
    /// The [`Operation`] byte.
    operation: u8,
}

impl RequestHeader {
    fn check_fields(&self) -> Result<(), FieldError> {
        ensure(self.client.get() != 0, "client id is zero")?;
        ensure(self.request.get() != 0, "request number is zero")?;
        ensure(
            Operation::from_u8(self.operation).is_some(),
            "unknown operation",
        )
    }

    fn check_body(&self, _body: &[u8]) -> Result<(), FieldError> {
        Ok(())
    }

    /// The operation, which `check_fields` guarantees is known.
    pub fn operation(&self) -> Operation {
        Operation::from_u8(self.operation).expect("validated header has a known operation")
    }
}

command_header! {
    /// The answer to a request. `result` says whether the body is the
    /// operation's reply or an error body.
    ReplyHeader => Command::Reply;
    /// The client the reply is for.
    client: U128,
    /// The request number being answered.
    request: U64,
    /// The op the request was committed at (0 for operations that are not replicated).
    op: U64,
    /// The replying replica's commit number.
    commit: U64,
    /// The [`Operation`] byte of the request.
    operation: u8,
    /// The [`ResultCode`].
    result: U16,
    /// How long the node delayed the request before handling it, in
    /// milliseconds: its user was over a quota (see `ops::Quota`).
    throttle_ms: U32,
}

impl ReplyHeader {
    fn check_fields(&self) -> Result<(), FieldError> {
        ensure(self.client.get() != 0, "client id is zero")?;
        ensure(self.request.get() != 0, "request number is zero")?;
        ensure(
            Operation::from_u8(self.operation).is_some(),
            "unknown operation",
        )?;
        ensure(
            ResultCode::from_u16(self.result.get()).is_some(),
            "unknown result code",
        )?;
        ensure(self.op.get() <= self.commit.get(), "op > commit")
    }

    fn check_body(&self, _body: &[u8]) -> Result<(), FieldError> {
        Ok(())
    }

    /// The operation, which `check_fields` guarantees is known.
    pub fn operation(&self) -> Operation {
        Operation::from_u8(self.operation).expect("validated header has a known operation")
    }

    /// The result code, which `check_fields` guarantees is known.
    pub fn result(&self) -> ResultCode {
        ResultCode::from_u16(self.result.get()).expect("validated header has a known result")
    }
}
