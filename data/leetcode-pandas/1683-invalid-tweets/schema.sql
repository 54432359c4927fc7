CREATE TABLE Tweets (
  tweet_id INT PRIMARY KEY,
  content VARCHAR(50)
);
