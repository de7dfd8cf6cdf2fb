-- Small stores for --effects auto: coupons and their redemptions, items
-- in stock, account balances; and two whose outcome depends on the order
-- of the attempts: units sold in unequal orders, transfers between two
-- wallets. {{.RunID}} keeps runs apart; drop.sql removes them. No
-- effects query is written anywhere: racetest compares each burst's
-- change of these tables with the same attempts run one at a time.
CREATE TABLE coupons_{{.RunID}} (code VARCHAR(64) PRIMARY KEY, used INT NOT NULL DEFAULT 0);
CREATE TABLE redemptions_{{.RunID}} (code VARCHAR(64) NOT NULL, attempt INT NOT NULL);
CREATE TABLE items_{{.RunID}} (code VARCHAR(64) PRIMARY KEY, stock INT NOT NULL);
CREATE TABLE accounts_{{.RunID}} (code VARCHAR(64) PRIMARY KEY, balance INT NOT NULL);
CREATE TABLE stock_{{.RunID}} (code VARCHAR(64) PRIMARY KEY, units INT NOT NULL);
CREATE TABLE orders_{{.RunID}} (code VARCHAR(64) NOT NULL, qty INT NOT NULL);
CREATE TABLE wallets_{{.RunID}} (code VARCHAR(64) NOT NULL, owner INT NOT NULL, balance INT NOT NULL, PRIMARY KEY (code, owner));
CREATE TABLE transfers_{{.RunID}} (code VARCHAR(64) NOT NULL, amount INT NOT NULL);
