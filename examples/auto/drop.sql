DROP TABLE IF EXISTS coupons_{{.RunID}};
DROP TABLE IF EXISTS redemptions_{{.RunID}};
DROP TABLE IF EXISTS items_{{.RunID}};
DROP TABLE IF EXISTS accounts_{{.RunID}};
DROP TABLE IF EXISTS stock_{{.RunID}};
DROP TABLE IF EXISTS orders_{{.RunID}};
DROP TABLE IF EXISTS wallets_{{.RunID}};
DROP TABLE IF EXISTS transfers_{{.RunID}};
