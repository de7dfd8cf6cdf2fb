-- The coupons and their redemptions. {{.RunID}} in the names keeps two runs
-- (and anything else in the database) apart; drop.sql removes both tables.
CREATE TABLE coupons_{{.RunID}} (
  code VARCHAR(64) PRIMARY KEY,
  used INT NOT NULL DEFAULT 0
);
CREATE TABLE redemptions_{{.RunID}} (
  code    VARCHAR(64) NOT NULL,
  attempt INT NOT NULL
);
