-- Before each burst (and each solo twin): a coupon, an item with 3 in
-- stock, an empty account, 10 units of stock and two wallets of 100,
-- named by the burst's token.
INSERT INTO coupons_{{.RunID}} (code) VALUES ('{{.Token}}');
INSERT INTO items_{{.RunID}} (code, stock) VALUES ('{{.Token}}', 3);
INSERT INTO accounts_{{.RunID}} (code, balance) VALUES ('{{.Token}}', 0);
INSERT INTO stock_{{.RunID}} (code, units) VALUES ('{{.Token}}', 10);
INSERT INTO wallets_{{.RunID}} (code, owner, balance) VALUES ('{{.Token}}', 0, 100), ('{{.Token}}', 1, 100);
