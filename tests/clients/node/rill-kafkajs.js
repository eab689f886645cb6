#!/usr/bin/env node
// kafkajs driver for Rill's end-to-end tests (tests/e2e/test_kafkajs.py runs it).
//
//   node rill-kafkajs.js BOOTSTRAP COMMAND 'JSON-ARGS'
//
// JSON-ARGS may carry `security` (TLS files, SASL login) for a secured listener.
// Prints one line `RESULT <json>` on success and exits 0; any error exits 1 with the stack.
// Consumers in kafkajs always join a group, and groups are a later issue, so reading here goes through
// kafkajs's own cluster/broker objects (a real kafkajs Fetch, decoded and decompressed by kafkajs)
// with a partition chosen directly, like an assigned consumer.
'use strict'

const { Kafka, CompressionTypes, CompressionCodecs, logLevel } = require('kafkajs')
const SnappyCodec = require('kafkajs-snappy')
const fs = require('fs')

CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec

const COMPRESSION = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
}

// `security` (optional, from the JSON args): `ssl: {ca, cert, key}` (PEM file paths; cert and
// key for mTLS) and `sasl: {mechanism, username, password}` (kafkajs's mechanism names, e.g.
// 'scram-sha-512'), as a kafkajs user configures a secured cluster.
function connectionSecurity(security) {
  const out = {}
  if (!security) return out
  if (security.ssl) {
    const read = path => (path ? fs.readFileSync(path, 'utf-8') : undefined)
    out.ssl = { ca: [read(security.ssl.ca)], cert: read(security.ssl.cert), key: read(security.ssl.key) }
  }
  if (security.sasl) out.sasl = security.sasl
  return out
}

function client(bootstrap, security) {
  return new Kafka({
    ...connectionSecurity(security),
    clientId: 'rill-e2e-kafkajs',
    brokers: [bootstrap],
    logLevel: logLevel.WARN,
    connectionTimeout: 10000,
    requestTimeout: 30000,
    retry: { retries: 5, initialRetryTime: 200 },
  })
}

async function produce(kafka, a) {
  const producer = kafka.producer({
    idempotent: !!a.idempotent,
    maxInFlightRequests: a.idempotent ? 1 : undefined,
    allowAutoTopicCreation: a.allowAutoTopicCreation !== false,
  })
  await producer.connect()
  try {
    const results = []
    // One send per chunk: several record batches, each acknowledged per `acks`.
    const chunk = a.chunk || a.messages.length
    for (let i = 0; i < a.messages.length; i += chunk) {
      const messages = a.messages.slice(i, i + chunk).map(m => ({
        key: m.key == null ? null : m.key,
        value: m.value,
        partition: a.partition,
        timestamp: m.timestamp == null ? undefined : String(m.timestamp),
        headers: m.headers,
      }))
      const meta = await producer.send({
        topic: a.topic,
        acks: a.acks,
        timeout: 30000,
        compression: COMPRESSION[a.compression || 'none'],
        messages,
      })
      results.push(...meta)
    }
    return results
  } finally {
    await producer.disconnect()
  }
}

async function withAdmin(kafka, fn) {
  const admin = kafka.admin()
  await admin.connect()
  try {
    return await fn(admin)
  } finally {
    await admin.disconnect()
  }
}

function privateCreateCluster(kafka) {
  const sym = Object.getOwnPropertySymbols(kafka).find(s => s.description === 'private:Kafka:createCluster')
  if (!sym) throw new Error('kafkajs internals changed: createCluster symbol not found')
  return kafka[sym]
}

async function fetchPartition(kafka, a) {
  // Reads `count` messages of one partition from `offset` with kafkajs's own Fetch (v11 at most).
  const cluster = privateCreateCluster(kafka)({ allowAutoTopicCreation: false, isolationLevel: a.isolationLevel })
  await cluster.connect()
  try {
    await cluster.addTargetTopic(a.topic)
    await cluster.refreshMetadata()
    const meta = cluster.findTopicPartitionMetadata(a.topic).find(p => p.partitionId === a.partition)
    if (!meta) throw new Error(`no metadata for ${a.topic}[${a.partition}]`)
    const broker = await cluster.findBroker({ nodeId: meta.leader })
    const out = []
    let offset = BigInt(a.offset)
    const deadline = Date.now() + (a.timeoutMs || 20000)
    while (out.length < a.count && Date.now() < deadline) {
      const res = await broker.fetch({
        isolationLevel: a.isolationLevel,
        maxWaitTime: 500,
        minBytes: 1,
        maxBytes: 1 << 20,
        topics: [{ topic: a.topic, partitions: [{ partition: a.partition, fetchOffset: offset.toString(), maxBytes: 1 << 20 }] }],
      })
      const part = res.responses[0].partitions[0]
      if (part.errorCode !== 0) throw new Error(`fetch error code ${part.errorCode}`)
      for (const m of part.messages) {
        if (BigInt(m.offset) < offset) continue // whole batches come back: skip what precedes
        out.push({
          offset: m.offset,
          key: m.key == null ? null : m.key.toString(),
          value: m.value == null ? null : m.value.toString(),
          timestamp: m.timestamp,
        })
        offset = BigInt(m.offset) + 1n
      }
    }
    return out.slice(0, a.count)
  } finally {
    await cluster.disconnect()
  }
}

async function groupConsume(kafka, a) {
  // A real kafkajs group consumer: subscribe, read `count` messages, commit. Needs consumer groups.
  const consumer = kafka.consumer({ groupId: a.groupId, sessionTimeout: 10000 })
  await consumer.connect()
  const out = []
  try {
    await consumer.subscribe({ topic: a.topic, fromBeginning: true })
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`only ${out.length} of ${a.count} messages`)), a.timeoutMs || 30000)
      consumer.run({
        eachMessage: async ({ partition, message }) => {
          out.push({ partition, offset: message.offset, value: message.value.toString() })
          if (out.length >= a.count) { clearTimeout(timer); resolve() }
        },
      }).catch(reject)
    })
  } finally {
    await consumer.disconnect()
  }
  return out
}

async function txnProduce(kafka, a) {
  // A transactional producer: one transaction per entry of `a.transactions`, committed or aborted.
  const producer = kafka.producer({
    transactionalId: a.transactionalId,
    idempotent: true,
    maxInFlightRequests: 1,
    transactionTimeout: a.transactionTimeout || 30000,
  })
  await producer.connect()
  try {
    for (const t of a.transactions) {
      const txn = await producer.transaction()
      await txn.send({
        topic: a.topic,
        acks: -1,
        timeout: 30000,
        messages: t.messages.map(value => ({ value, partition: a.partition })),
      })
      if (t.commit) await txn.commit()
      else await txn.abort()
    }
    return true
  } finally {
    await producer.disconnect()
  }
}

const COMMANDS = {
  produce,
  'txn-produce': txnProduce,
  fetch: fetchPartition,
  'group-consume': groupConsume,
  'create-topics': (kafka, a) => withAdmin(kafka, admin => admin.createTopics({
    topics: a.topics, waitForLeaders: true, timeout: 30000,
  })),
  'delete-topics': (kafka, a) => withAdmin(kafka, admin => admin.deleteTopics({ topics: a.topics, timeout: 30000 }).then(() => true)),
  'list-topics': kafka => withAdmin(kafka, admin => admin.listTopics()),
  'topic-metadata': (kafka, a) => withAdmin(kafka, admin => admin.fetchTopicMetadata({ topics: a.topics })),
  offsets: (kafka, a) => withAdmin(kafka, admin => admin.fetchTopicOffsets(a.topic)),
  'describe-configs': (kafka, a) => withAdmin(kafka, admin => admin.describeConfigs({
    resources: a.resources, includeSynonyms: !!a.includeSynonyms,
  })),
  'alter-configs': (kafka, a) => withAdmin(kafka, admin => admin.alterConfigs({
    resources: a.resources, validateOnly: !!a.validateOnly,
  })),
  // kafkajs looks the leaders up in metadata it never loads itself: load the topic's first.
  'delete-records': (kafka, a) => withAdmin(kafka, admin => admin.fetchTopicMetadata({ topics: [a.topic] })
    .then(() => admin.deleteTopicRecords({ topic: a.topic, partitions: a.partitions }))
    .then(() => true)),
  'list-groups': kafka => withAdmin(kafka, admin => admin.listGroups()),

  'offsets-by-time': (kafka, a) => withAdmin(kafka, admin => admin.fetchTopicOffsetsByTimestamp(a.topic, a.timestamp)),
}

async function main() {
  const [bootstrap, command, json] = process.argv.slice(2)
  const fn = COMMANDS[command]
  if (!fn) throw new Error(`unknown command ${command}; known: ${Object.keys(COMMANDS).join(', ')}`)
  const args = JSON.parse(json || '{}')
  const result = await fn(client(bootstrap, args.security), args)
  process.stdout.write(`RESULT ${JSON.stringify(result)}\n`)
}

main().then(() => process.exit(0), err => {
  // An aggregate error (e.g. CreateTopics) says which Kafka error each part got.
  for (const inner of (err && err.errors) || []) console.error(`inner error ${inner.type}: ${inner.message}`)
  console.error(err && err.stack ? err.stack : err)
  process.exit(1)
})
