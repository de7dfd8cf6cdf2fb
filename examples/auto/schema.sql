-- Three small stores for --effects auto: coupons and their redemptions,
-- items in stock, account balances. {{.RunID}} keeps runs apart; drop.sql
-- removes them. No effects query is written anywhere: racetest compares
-- each burst's change of these tables with the same attempts run one at
-- a time.
CREATE TABLE coupons_{{.RunID}} (code VARCHAR(64) PRIMARY KEY, used INT NOT NULL DEFAULT 0);
CREATE TABLE redemptions_{{.RunID}} (code VARCHAR(64) NOT NULL, attempt INT NOT NULL);
CREATE TABLE items_{{.RunID}} (code VARCHAR(64) PRIMARY KEY, stock INT NOT NULL);
CREATE TABLE accounts_{{.RunID}} (code VARCHAR(64) PRIMARY KEY, balance INT NOT NULL);
