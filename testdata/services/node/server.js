// A coupon service: a coupon is issued once and may be redeemed once.
//
// Written as a small team would write it: Node's http module, node-postgres
// (pg) for PostgreSQL or mysql2 for MariaDB and MySQL, each with its pool.
// Statements outside a transaction run in autocommit; pg sends its
// parameterised queries with the extended protocol (Parse, Bind, Execute)
// and mysql2's execute() prepares each statement on the server.
//
//   POST /coupons?code=C                issue coupon C (one use)
//   POST /<variant>/redeem?code=C       redeem it: 200, or 409 when it was already redeemed
//   GET  /health                        200 once the database answers
//
// Each <variant> is one way of redeeming, two of them wrong:
//
//   naive         count C's redemptions; when there are none, insert one
//   naive-rmw     read C's uses left; when there is one, write back one less and record the redemption
//   unique        the naive code, on a table whose unique index refuses a second redemption (409)
//   conditional   UPDATE the coupon WHERE it has a use left; the row count says who redeemed it
//   for-update    lock the coupon's row (SELECT ... FOR UPDATE) in a transaction, then check and write
//   serializable  the naive code in a SERIALIZABLE transaction, retried (after a pause)
//                 when the server aborts it
//
// Configuration (environment):
//
//   DATABASE_URL  postgres://user:pass@host:port/db or mysql://user:pass@host:port/db
//   TABLE_PREFIX  the tables are <prefix>coupons (code, uses_left), <prefix>redemptions (code)
//                 and <prefix>redemptions_unique (code, unique); whoever runs the service makes them
//   LISTEN        host:port (default 127.0.0.1:8080; port 0: any free port, printed)
'use strict';

const http = require('http');

const SERIALIZABLE_TRIES = 10;

// Each database's driver behind one small interface: query(sql, params)
// with ? placeholders, answering { rows, count } (rows as arrays of
// values; count the rows a write changed), and transaction(fn, level).
function postgres(url) {
  const { Pool } = require('pg');
  const pool = new Pool({ connectionString: url, max: 8 });
  // $1, $2, … in place of each ?.
  const numbered = (sql) => {
    let n = 0;
    return sql.replace(/\?/g, () => '$' + ++n);
  };
  const on = (client) => async (sql, params = []) => {
    const r = await client.query({ text: numbered(sql), values: params, rowMode: 'array' });
    return { rows: r.rows, count: r.rowCount };
  };
  return {
    query: on(pool),
    async transaction(fn, level) {
      const client = await pool.connect();
      try {
        await client.query(level ? `BEGIN ISOLATION LEVEL ${level}` : 'BEGIN');
        const result = await fn(on(client));
        await client.query('COMMIT');
        return result;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        throw err;
      } finally {
        client.release();
      }
    },
    duplicate: (err) => err.code === '23505',
    // SERIALIZABLE aborts one of two conflicting transactions with 40001
    // (40P01 when they deadlocked first).
    retryable: (err) => err.code === '40001' || err.code === '40P01',
  };
}

function mysql(url) {
  const mysql2 = require('mysql2/promise');
  const pool = mysql2.createPool({ uri: url, connectionLimit: 8 });
  const on = (conn) => async (sql, params = []) => {
    const [result] = await conn.execute({ sql, rowsAsArray: true }, params);
    return Array.isArray(result) ? { rows: result, count: result.length } : { rows: [], count: result.affectedRows };
  };
  return {
    query: on(pool),
    async transaction(fn, level) {
      const conn = await pool.getConnection();
      try {
        // The level of the transaction that begins next.
        if (level) await conn.query(`SET TRANSACTION ISOLATION LEVEL ${level}`);
        await conn.beginTransaction();
        const result = await fn(on(conn));
        await conn.commit();
        return result;
      } catch (err) {
        await conn.rollback().catch(() => {});
        throw err;
      } finally {
        conn.release();
      }
    },
    duplicate: (err) => err.errno === 1062,
    // InnoDB's SERIALIZABLE is REPEATABLE READ whose plain SELECTs take
    // shared locks: two requests that both read, then both insert, each
    // wait on the other's lock, and the server breaks the deadlock by
    // aborting one (1213, SQLSTATE 40001); a lock wait timeout is 1205.
    retryable: (err) => err.errno === 1213 || err.errno === 1205,
  };
}

class AlreadyRedeemed extends Error {}

function coupons(db, prefix) {
  const COUPONS = `${prefix}coupons`;
  const REDEMPTIONS = `${prefix}redemptions`;
  const UNIQUE = `${prefix}redemptions_unique`;

  async function naive(code, table = REDEMPTIONS, q = db.query) {
    const { rows } = await q(`SELECT count(*) FROM ${table} WHERE code = ?`, [code]);
    if (Number(rows[0][0]) > 0) throw new AlreadyRedeemed();
    await q(`INSERT INTO ${table} (code) VALUES (?)`, [code]);
  }

  return {
    issue: (code) => db.query(`INSERT INTO ${COUPONS} (code, uses_left) VALUES (?, 1)`, [code]),
    health: () => db.query('SELECT 1'),

    // The two wrong ways.
    naive: (code) => naive(code),
    'naive-rmw': async (code) => {
      const { rows } = await db.query(`SELECT uses_left FROM ${COUPONS} WHERE code = ?`, [code]);
      if (rows.length === 0 || rows[0][0] < 1) throw new AlreadyRedeemed();
      await db.query(`UPDATE ${COUPONS} SET uses_left = ? WHERE code = ?`, [rows[0][0] - 1, code]);
      await db.query(`INSERT INTO ${REDEMPTIONS} (code) VALUES (?)`, [code]);
    },

    // The fixes.
    unique: async (code) => {
      try {
        await naive(code, UNIQUE);
      } catch (err) {
        if (db.duplicate(err)) throw new AlreadyRedeemed();
        throw err;
      }
    },
    conditional: (code) =>
      db.transaction(async (q) => {
        const { count } = await q(`UPDATE ${COUPONS} SET uses_left = uses_left - 1 WHERE code = ? AND uses_left > 0`, [code]);
        if (count !== 1) throw new AlreadyRedeemed();
        await q(`INSERT INTO ${REDEMPTIONS} (code) VALUES (?)`, [code]);
      }),
    'for-update': (code) =>
      db.transaction(async (q) => {
        const { rows } = await q(`SELECT uses_left FROM ${COUPONS} WHERE code = ? FOR UPDATE`, [code]);
        if (rows.length === 0 || rows[0][0] < 1) throw new AlreadyRedeemed();
        await q(`UPDATE ${COUPONS} SET uses_left = uses_left - 1 WHERE code = ?`, [code]);
        await q(`INSERT INTO ${REDEMPTIONS} (code) VALUES (?)`, [code]);
      }),
    serializable: async (code) => {
      for (let attempt = 1; ; attempt++) {
        try {
          return await db.transaction((q) => naive(code, REDEMPTIONS, q), 'SERIALIZABLE');
        } catch (err) {
          if (!db.retryable(err) || attempt === SERIALIZABLE_TRIES) throw err;
          // The transaction the server let through has yet to commit:
          // retried at once, this one would read before its write and be
          // aborted again. Wait longer each time, by a random amount so two
          // retries do not meet again.
          await new Promise((done) => setTimeout(done, (0.5 + Math.random() / 2) * 20 * 2 ** (attempt - 1)));
        }
      }
    },
  };
}

function main() {
  const url = process.env.DATABASE_URL || '';
  let db;
  if (/^postgres(ql)?:/.test(url)) db = postgres(url);
  else if (/^(mysql|mariadb):/.test(url)) db = mysql(url.replace(/^mariadb:/, 'mysql:'));
  else {
    console.error('DATABASE_URL must be a postgres:// or mysql:// URL');
    process.exit(2);
  }
  const app = coupons(db, process.env.TABLE_PREFIX || '');
  const redeem = new Set(['naive', 'naive-rmw', 'unique', 'conditional', 'for-update', 'serializable']);

  const server = http.createServer((req, res) => {
    const answer = (status, text) => {
      res.writeHead(status, { 'Content-Type': 'text/plain' });
      res.end(text + '\n');
    };
    req.resume(); // the body, if any, is not used
    req.on('end', async () => {
      const url = new URL(req.url, 'http://localhost');
      const parts = url.pathname.split('/').filter(Boolean);
      const code = url.searchParams.get('code');
      try {
        if (req.method === 'GET' && url.pathname === '/health') {
          await app.health();
          return answer(200, 'ok');
        }
        if (req.method !== 'POST') return answer(404, 'not found');
        if (!code) return answer(400, 'code= is required');
        if (parts.length === 1 && parts[0] === 'coupons') {
          await app.issue(code);
          return answer(201, 'issued');
        }
        if (parts.length === 2 && parts[1] === 'redeem' && redeem.has(parts[0])) {
          await app[parts[0]](code);
          return answer(200, 'redeemed');
        }
        answer(404, 'not found');
      } catch (err) {
        if (err instanceof AlreadyRedeemed) answer(409, 'already redeemed');
        else answer(500, `${err.code || err.name}: ${err.message}`);
      }
    });
  });
  const [host, port] = (process.env.LISTEN || '127.0.0.1:8080').split(/:(?=[^:]*$)/);
  // Port 0: any free port; the one the system chose is printed.
  server.listen(Number(port), host, () => console.log(`listening on ${host}:${server.address().port}`));
}

main();
