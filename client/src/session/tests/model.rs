//! Property: a model of the group's client table under random faults (lost
//! requests, Busy answers, dropped connections, failovers, evictions, time
//! passing): a request number is never reused for another batch, no gap is
//! left, acks keep their order; with the faults a healthy cluster has,
//! nothing is lost.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use proptest::prelude::*;

use super::*;

/// The group's client table as the server keeps it, plus the checks that
/// matter: a number is never reused for another batch, no token commits twice.
#[derive(Debug, Default)]
struct ModelGroup {
    tables: HashMap<u128, BTreeMap<u64, (Token, u64)>>,
    commits: Vec<Token>,
    too_large: HashSet<Token>,
}

impl ModelGroup {
    fn handle(&mut self, client: u128, request: u64, token: Token) -> (u64, ReplyBody) {
        if self.too_large.contains(&token) {
            return (0, ReplyBody::Error(ErrorBody::TooLarge { size: 2, max: 1 }));
        }
        let Some(table) = self.tables.get(&client) else {
            if request != 1 {
                let body = ErrorBody::message(ResultCode::SessionEvicted, "unknown client");
                return (0, ReplyBody::Error(body));
            }
            return self.commit(client, request, token);
        };
        if let Some((stored, op)) = table.get(&request) {
            assert_eq!(
                *stored, token,
                "({client}, {request}) reused for another batch"
            );
            return (*op, ReplyBody::Ok(Bytes::new()));
        }
        let expected = table.keys().next_back().map_or(1, |last| last + 1);
        if request == expected {
            self.commit(client, request, token)
        } else {
            (0, ReplyBody::Error(ErrorBody::OutOfOrder { expected }))
        }
    }

    fn commit(&mut self, client: u128, request: u64, token: Token) -> (u64, ReplyBody) {
        assert!(
            !self.commits.contains(&token),
            "token {token} committed twice"
        );
        self.commits.push(token);
        let op = self.commits.len() as u64;
        self.tables
            .entry(client)
            .or_default()
            .insert(request, (token, op));
        (op, ReplyBody::Ok(Bytes::new()))
    }
}

#[derive(Debug)]
struct Link {
    id: ConnectionId,
    node: usize,
    to_server: VecDeque<(u128, u64, Token)>,
    to_client: VecDeque<Reply>,
}

#[derive(Debug, Clone, Copy)]
enum Event {
    Submit { too_large: bool },
    DeliverRequest { link: usize, busy: bool },
    DeliverReply { link: usize },
    LoseRequest { link: usize },
    DropConnection { link: usize },
    Advance { ms: u64 },
    Failover,
    Evict,
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        3 => prop::bool::weighted(0.05).prop_map(|too_large| Event::Submit { too_large }),
        6 => (0..4usize, prop::bool::weighted(0.2))
            .prop_map(|(link, busy)| Event::DeliverRequest { link, busy }),
        6 => (0..4usize).prop_map(|link| Event::DeliverReply { link }),
        1 => (0..4usize).prop_map(|link| Event::LoseRequest { link }),
        1 => (0..4usize).prop_map(|link| Event::DropConnection { link }),
        3 => (0..150u64).prop_map(|ms| Event::Advance { ms }),
        1 => Just(Event::Failover),
        1 => Just(Event::Evict),
    ]
}

struct World {
    /// How long each request may take (session clock, ms).
    deadline_ms: u64,
    session: Session,
    group: ModelGroup,
    links: Vec<Link>,
    next_connection: ConnectionId,
    primary: usize,
    route: usize,
    now_ms: u64,
    next_token: Token,
    /// Every (client, request) ever transmitted, and its token.
    transmitted: HashMap<(u128, u64), Token>,
    /// When each connection last delivered a committed reply.
    progress_ms: HashMap<ConnectionId, u64>,
    outcomes: BTreeMap<Token, Result<Bytes, ClientError>>,
}

impl World {
    fn new(seed: u64, deadline_ms: u64) -> World {
        World {
            deadline_ms,
            session: Session::new(GROUP, config(), Prng::new(seed)),
            group: ModelGroup::default(),
            links: Vec::new(),
            next_connection: 1,
            primary: 0,
            route: 0,
            now_ms: 0,
            next_token: 1,
            transmitted: HashMap::new(),
            progress_ms: HashMap::new(),
            outcomes: BTreeMap::new(),
        }
    }

    fn apply(&mut self, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::Transmit {
                    token,
                    client,
                    request,
                    ..
                } => {
                    // Never a number reused for another batch, never a gap.
                    let previous = self.transmitted.insert((client, request), token);
                    assert!(previous.is_none_or(|previous| previous == token));
                    assert!(
                        request == 1 || self.transmitted.contains_key(&(client, request - 1)),
                        "gap: ({client}, {request}) sent before {}",
                        request - 1
                    );
                    let link = self.link_to(self.route);
                    self.links[link]
                        .to_server
                        .push_back((client, request, token));
                }
                Action::Complete { token, outcome } => {
                    assert!(
                        self.outcomes.insert(token, outcome).is_none(),
                        "completed twice"
                    );
                }
                Action::Redirect {
                    primary_replica, ..
                } => self.route = usize::from(primary_replica),
                Action::RefreshRouting => self.route = self.primary,
                Action::SuspectConnection { connection } => self.close(connection),
            }
        }
    }

    fn link_to(&mut self, node: usize) -> usize {
        if let Some(index) = self.links.iter().position(|link| link.node == node) {
            return index;
        }
        self.links.push(Link {
            id: self.next_connection,
            node,
            to_server: VecDeque::new(),
            to_client: VecDeque::new(),
        });
        self.next_connection += 1;
        self.links.len() - 1
    }

    fn close(&mut self, connection: ConnectionId) {
        if let Some(index) = self.links.iter().position(|link| link.id == connection) {
            self.links.remove(index);
            self.session.on_connection_lost(connection);
        }
    }

    fn pump(&mut self) {
        let mut actions = Vec::new();
        let progress = &self.progress_ms;
        self.session.on_tick(
            self.now_ms,
            |connection| progress.get(&connection).copied(),
            &mut actions,
        );
        self.apply(std::mem::take(&mut actions));
        if self.session.wants_transmit() {
            let link = self.link_to(self.route);
            let connection = self.links[link].id;
            self.session
                .poll_transmit(self.now_ms, connection, ATTEMPT_TIMEOUT_MS, &mut actions);
            self.apply(actions);
        }
    }

    fn deliver_request(&mut self, link: usize, busy: bool) {
        let Some((client, request, token)) = self.links[link].to_server.pop_front() else {
            return;
        };
        let node = self.links[link].node;
        let (op, body) = if node != self.primary {
            let body = ErrorBody::NotPrimary {
                view: 0,
                primary_replica: self.primary as u8,
                primary_node: self.primary as u32,
                address: String::new(),
            };
            (0, ReplyBody::Error(body))
        } else if busy {
            (0, ReplyBody::Error(ErrorBody::Busy { retry_after_ms: 10 }))
        } else {
            self.group.handle(client, request, token)
        };
        let id = self.links[link].id;
        self.links[link]
            .to_client
            .push_back(reply(id, client, request, op, body));
    }

    fn step(&mut self, event: Event) {
        match event {
            Event::Submit { too_large } => {
                let token = self.next_token;
                self.next_token += 1;
                if too_large {
                    self.group.too_large.insert(token);
                }
                let mut submission = submission(token, self.now_ms);
                submission.deadline_ms = self.now_ms + self.deadline_ms;
                self.session.submit(submission);
            }
            Event::DeliverRequest { link, busy } if link < self.links.len() => {
                self.deliver_request(link, busy);
            }
            Event::DeliverReply { link } if link < self.links.len() => {
                if let Some(reply) = self.links[link].to_client.pop_front() {
                    if matches!(reply.body, ReplyBody::Ok(_)) {
                        self.progress_ms.insert(reply.connection, self.now_ms);
                    }
                    let mut actions = Vec::new();
                    self.session.on_reply(reply, self.now_ms, &mut actions);
                    self.apply(actions);
                }
            }
            Event::LoseRequest { link } if link < self.links.len() => {
                self.links[link].to_server.pop_front();
            }
            Event::DropConnection { link } if link < self.links.len() => {
                let id = self.links[link].id;
                self.close(id);
            }
            Event::Advance { ms } => self.now_ms += ms,
            Event::Failover => self.primary = 1 - self.primary,
            Event::Evict => {
                // Only clients with nothing on the wire whose committed
                // requests were all acknowledged: the group takes an unknown
                // client's request 1 as new, so evicting a client that may
                // still retry its request 1 would apply it twice. That is a
                // limit of the server's eviction rule, not something the SDK
                // can tell apart (see the crate report).
                let on_wire: HashSet<u128> = self
                    .links
                    .iter()
                    .flat_map(|link| link.to_server.iter().map(|(client, _, _)| *client))
                    .collect();
                let outcomes = &self.outcomes;
                let victim = self.group.tables.iter().find_map(|(client, table)| {
                    let acknowledged = table
                        .values()
                        .all(|(token, _)| outcomes.contains_key(token));
                    (acknowledged && !on_wire.contains(client)).then_some(*client)
                });
                if let Some(victim) = victim {
                    self.group.tables.remove(&victim);
                }
            }
            _ => {}
        }
        self.pump();
    }

    /// Faults stop: deliver everything until every request is finished.
    fn heal(&mut self) {
        for _ in 0..100_000 {
            if self.outcomes.len() as u64 == self.next_token - 1 {
                return;
            }
            for link in 0..self.links.len() {
                while !self.links[link].to_server.is_empty() {
                    self.deliver_request(link, false);
                }
            }
            let mut actions = Vec::new();
            for link in 0..self.links.len() {
                while let Some(reply) = self
                    .links
                    .get_mut(link)
                    .and_then(|link| link.to_client.pop_front())
                {
                    self.session.on_reply(reply, self.now_ms, &mut actions);
                }
            }
            self.apply(actions);
            self.now_ms += 5;
            self.pump();
        }
        panic!(
            "requests still unfinished after healing: {:?}",
            self.session
        );
    }

    fn check(&self) {
        let commits: HashMap<Token, usize> = self
            .group
            .commits
            .iter()
            .enumerate()
            .map(|(index, token)| (*token, index))
            .collect();
        let mut last_ok_commit: Option<usize> = None;
        for (token, outcome) in &self.outcomes {
            match outcome {
                Ok(_) => {
                    let index = commits
                        .get(token)
                        .unwrap_or_else(|| panic!("ok token {token} never committed"));
                    // Acknowledged requests commit in submission order.
                    assert!(
                        last_ok_commit.is_none_or(|last| last < *index),
                        "order broken at {token}"
                    );
                    last_ok_commit = Some(*index);
                }
                Err(error) if error.is_outcome_unknown() => {}
                Err(error) => {
                    assert!(
                        !commits.contains_key(token),
                        "token {token} failed ({error}) yet committed"
                    );
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn faults_never_reuse_a_number_leave_a_gap_or_reorder_acks(
        seed in any::<u64>(),
        events in prop::collection::vec(event(), 1..300),
    ) {
        let mut world = World::new(seed, 3_000);
        for event in events {
            world.step(event);
        }
        world.heal();
        world.check();
        world.session.check_invariants();
        prop_assert!(world.session.is_idle());
    }

    #[test]
    fn benign_faults_lose_nothing_and_keep_order(
        seed in any::<u64>(),
        events in prop::collection::vec(benign_event(), 1..300),
    ) {
        let mut world = World::new(seed, u64::MAX / 2);
        for event in events {
            world.step(event);
        }
        world.heal();
        world.check();
        for (token, outcome) in &world.outcomes {
            if world.group.too_large.contains(token) {
                prop_assert_eq!(outcome, &Err(ClientError::TooLarge { size: 2, max: 1 }));
            } else {
                prop_assert!(outcome.is_ok(), "token {} failed: {:?}", token, outcome);
            }
        }
    }
}

/// Faults a healthy cluster has: no evictions, and requests never time out.
fn benign_event() -> impl Strategy<Value = Event> {
    event()
        .prop_filter("no evictions", |event| !matches!(event, Event::Evict))
        .prop_map(|event| match event {
            Event::Submit { .. } => Event::Submit { too_large: false },
            other => other,
        })
        .boxed()
        .prop_union(
            prop::bool::weighted(0.5)
                .prop_map(|too_large| Event::Submit { too_large })
                .boxed(),
        )
}
