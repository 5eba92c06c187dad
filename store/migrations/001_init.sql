-- 001: the data plane: events, markets, latest prices, trades, ingest rejects,
-- and the per-document revisions that order cache writes. Ids collate
-- bytewise ("C"): the API lists them in ascending bytewise order.

CREATE TABLE events (
    universal_id         text COLLATE "C" PRIMARY KEY,
    version              bigint           NOT NULL CHECK (version > 0),
    title                text             NOT NULL,
    category             text             NOT NULL,
    status               text             NOT NULL CHECK (status IN ('active', 'resolved', 'merged')),
    merged_into          text,
    venue_a_event_ticker text,
    venue_b_event_slug   text,
    venue_c_event_id     text,
    venue_d_event_id     text,
    volume               double precision NOT NULL,
    updated_at           timestamptz      NOT NULL,
    ingested_at          timestamptz      NOT NULL DEFAULT now()
);

CREATE TABLE markets (
    universal_id text COLLATE "C" PRIMARY KEY,
    event_id     text COLLATE "C" NOT NULL,
    version      bigint      NOT NULL CHECK (version > 0),
    title        text        NOT NULL,
    status       text        NOT NULL CHECK (status IN ('active', 'resolved')),
    venues       jsonb       NOT NULL,
    resolved_at  timestamptz,
    result       text,
    updated_at   timestamptz NOT NULL,
    ingested_at  timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX markets_event_id_idx ON markets (event_id);
CREATE INDEX markets_resolved_at_idx ON markets (resolved_at) WHERE resolved_at IS NOT NULL;

-- prices holds the latest full quote set per market; a market's price may
-- arrive before the market itself.
CREATE TABLE prices (
    market_id   text COLLATE "C" PRIMARY KEY,
    version     bigint      NOT NULL CHECK (version > 0),
    ts          timestamptz NOT NULL,
    quotes      jsonb       NOT NULL,
    ingested_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE trades (
    trade_id    text COLLATE "C" PRIMARY KEY,
    market_id   text COLLATE "C" NOT NULL,
    venue       text             NOT NULL,
    price       double precision NOT NULL,
    size        double precision NOT NULL,
    side        text             NOT NULL CHECK (side IN ('buy', 'sell')),
    ts          timestamptz      NOT NULL,
    ingested_at timestamptz      NOT NULL DEFAULT now()
);

CREATE INDEX trades_market_ts_idx ON trades (market_id, ts DESC, trade_id DESC);

CREATE TABLE ingest_rejects (
    id          bigserial PRIMARY KEY,
    subject     text        NOT NULL,
    kind        text        NOT NULL,
    reason      text        NOT NULL,
    payload     bytea       NOT NULL,
    stream_seq  bigint      NOT NULL,
    received_at timestamptz NOT NULL,
    -- a redelivered reject is recorded once
    UNIQUE (stream_seq, subject)
);

CREATE INDEX ingest_rejects_received_at_idx ON ingest_rejects (received_at);

-- doc_revs orders the writes of each cache document. A transaction that
-- changes anything a document derives from takes the document's row lock and a
-- fresh revision; the cache keeps a document only if its revision is higher
-- than the stored one. Documents are named 'e:<event id>' and 'm:<market id>'.
CREATE SEQUENCE doc_rev_seq;

CREATE TABLE doc_revs (
    doc text COLLATE "C" PRIMARY KEY,
    rev bigint NOT NULL
);
